#include "daemon/lib/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "daemon/lib/progress_format.h"
#include "jobs/time_format.h"
#include "common/utf8.h"

namespace ns::daemon {
namespace {

constexpr int64_t kHistoryMs = 6 * 3600 * 1000;
constexpr int64_t kBucketMs = 10 * 60 * 1000;

std::string num(double v, const char* fmt = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

int64_t total_of(const jobs::QueueCounts& c) { return c.queued + c.running + c.done + c.failed + c.cancelled + c.dead; }
int64_t finished_of(const jobs::QueueCounts& c) { return c.done + c.failed + c.cancelled + c.dead; }

std::string counts_html(const jobs::QueueCounts& c) {
  std::string s;
  const std::pair<const char*, int64_t> parts[] = {{"queued", c.queued}, {"running", c.running},     {"done", c.done},
                                                   {"failed", c.failed}, {"cancelled", c.cancelled}, {"dead", c.dead}};
  for (const auto& [name, n] : parts) {
    s += std::string("<span class=\"count ") + name + "\" data-state=\"" + name + "\">" + std::to_string(n) + " " +
         name + "</span> ";
  }
  return s;
}

// "3m05s ago" for a time; "-" for none.
std::string when(int64_t now_ms, int64_t then_ms) { return then_ms == 0 ? "-" : ago(now_ms, then_ms); }

std::string job_label(const jobs::Job& j) {
  if (!j.spec.batch.empty()) return j.spec.batch + (j.spec.custom_id.empty() ? "" : " " + j.spec.custom_id);
  return "job " + std::to_string(j.id);
}

// The chart: one bar per bucket of the history, its height the tokens that finished in it over its length.
std::string chart_svg(const StatusSnapshot& s) {
  const int64_t bucket = s.bucket_ms > 0 ? s.bucket_ms : kBucketMs;
  const int64_t span = s.history_ms > 0 ? s.history_ms : kHistoryMs;
  const int64_t first = (s.now_ms - span) / bucket * bucket;
  const int64_t buckets = std::max<int64_t>((s.now_ms - first) / bucket + 1, 1);
  std::map<int64_t, double> rate;  // bucket start -> tok/s
  double top = 0;
  for (const jobs::TokenBucket& b : s.history) {
    const double r = static_cast<double>(b.completion_tokens) / (static_cast<double>(bucket) / 1000);
    rate[b.start_ms] = r;
    top = std::max(top, r);
  }
  const double w = 720, h = 180, left = 56, bottom = 24, plot_w = w - left - 8, plot_h = h - bottom - 12;
  const double bar_w = plot_w / static_cast<double>(buckets);
  std::string svg = "<svg id=\"throughput-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w, "%.0f") +
                    "\" height=\"" + num(h, "%.0f") + "\" viewBox=\"0 0 " + num(w, "%.0f") + " " + num(h, "%.0f") +
                    "\" role=\"img\" aria-label=\"completion tokens per second over the last " +
                    num(static_cast<double>(span) / 3.6e6, "%.0f") + " hours\">";
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(h - bottom) + "\" x2=\"" + num(w - 8) + "\" y2=\"" +
         num(h - bottom) + "\" class=\"axis\"/>";
  svg += "<line x1=\"" + num(left) + "\" y1=\"12\" x2=\"" + num(left) + "\" y2=\"" + num(h - bottom) +
         "\" class=\"axis\"/>";
  svg += "<text x=\"" + num(left - 4) + "\" y=\"16\" text-anchor=\"end\">" + format_rate(top) + "</text>";
  svg += "<text x=\"" + num(left - 4) + "\" y=\"" + num(h - bottom) + "\" text-anchor=\"end\">0</text>";
  svg += "<text x=\"" + num(left) + "\" y=\"" + num(h - 6) + "\">-" +
         format_duration(static_cast<double>(span) / 1000) + "</text>";
  svg += "<text x=\"" + num(w - 8) + "\" y=\"" + num(h - 6) + "\" text-anchor=\"end\">now (tok/s per " +
         format_duration(static_cast<double>(bucket) / 1000) + ")</text>";
  for (int64_t i = 0; i < buckets; ++i) {
    const int64_t start = first + i * bucket;
    auto it = rate.find(start);
    if (it == rate.end() || top <= 0) continue;
    const double bh = plot_h * it->second / top;
    svg += "<rect class=\"bar\" x=\"" + num(left + static_cast<double>(i) * bar_w + 0.5) + "\" y=\"" +
           num(h - bottom - bh) + "\" width=\"" + num(std::max(bar_w - 1, 1.0)) + "\" height=\"" + num(bh) +
           "\" data-start-ms=\"" + std::to_string(start) + "\" data-tok-s=\"" + num(it->second, "%.3f") + "\"><title>" +
           html_escape(jobs::iso8601_utc(start)) + ": " + format_rate(it->second) + " tok/s</title></rect>";
  }
  svg += "</svg>";
  return svg;
}

const char* const kStyle =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}"
    "table{border-collapse:collapse}td,th{padding:.25em .7em;text-align:left;border-bottom:1px solid #ddd;"
    "vertical-align:top}"
    "progress.batch-progress{width:14em}.count{margin-right:.8em}.failed,.dead{color:#a00}"
    ".problem{color:#a00}.muted{color:#777}svg .axis{stroke:#888}svg .bar{fill:#3a7bd5}svg text{font-size:11px;"
    "fill:#555}";

}  // namespace

std::string html_escape(std::string_view text) {
  const std::string valid = to_valid_utf8(text);
  std::string out;
  out.reserve(valid.size() + valid.size() / 8);
  for (char c : valid) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // C0 controls are not allowed in HTML text: shown as U+FFFD, like bad UTF-8.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += "\xEF\xBF\xBD";
        else if (c == 0x7f)
          out += "\xEF\xBF\xBD";
        else
          out += c;
    }
  }
  return out;
}

StatusRequest status_page_request() {
  StatusRequest r;
  r.recent_limit = 10;
  r.batch_limit = 20;
  r.history_ms = kHistoryMs;
  r.bucket_ms = kBucketMs;
  r.failures = 10;
  return r;
}

std::string status_page_html(const StatusSnapshot& s, const StatusPageOptions& options) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  if (options.refresh_s > 0)
    o += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(options.refresh_s) + "\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>nightshift status</title>\n";
  o += std::string("<style>") + kStyle + "</style>\n</head>\n<body>\n";
  o += "<h1>nightshift</h1>\n<p id=\"queue\">" + counts_html(s.counts);
  if (s.counts.retry_waiting > 0) o += "(" + std::to_string(s.counts.retry_waiting) + " waiting to retry) ";
  o += "<span class=\"muted\">as of " + html_escape(jobs::iso8601_utc(s.now_ms)) + "</span></p>\n";

  // Batches.
  std::map<std::string, double> batch_tok_s;
  for (const jobs::Job& j : s.running) {
    if (!j.spec.batch.empty()) batch_tok_s[j.spec.batch] += j.progress.tok_s;
  }
  o += "<h2>Batches</h2>\n";
  if (s.batches.empty()) {
    o += "<p class=\"muted\">no batches</p>\n";
  } else {
    o += "<table id=\"batches\">\n<tr><th>batch</th><th>progress</th><th>finished</th><th>states</th>"
         "<th>throughput</th><th>ETA</th><th>submitted</th></tr>\n";
    for (const jobs::BatchSummary& b : s.batches) {
      const int64_t total = total_of(b.counts), finished = finished_of(b.counts);
      const std::string name = html_escape(b.name);
      std::string eta = "-";
      if (b.finished_ms != 0) {
        eta = "complete " + when(s.now_ms, b.finished_ms);
      } else {
        // Its queued jobs included, each job's output as long as its done jobs' (jobs/batch_eta.h).
        const std::optional<double> e = jobs::batch_eta_s(b.progress, s.now_ms);
        if (e) eta = format_duration(*e);
      }
      const auto rate = batch_tok_s.find(b.name);
      o += "<tr class=\"batch\" data-batch=\"" + name + "\"><td>" + name +
           "</td><td><progress class=\"batch-progress\" "
           "data-batch=\"" +
           name + "\" data-finished=\"" + std::to_string(finished) + "\" data-total=\"" + std::to_string(total) +
           "\" value=\"" + std::to_string(finished) + "\" max=\"" + std::to_string(std::max<int64_t>(total, 1)) +
           "\">" + std::to_string(finished) + "/" + std::to_string(total) + "</progress></td><td>" +
           std::to_string(finished) + "/" + std::to_string(total) + "</td><td>" + counts_html(b.counts) + "</td><td>" +
           (rate == batch_tok_s.end() ? std::string("-") : format_rate(rate->second) + " tok/s") + "</td><td>" + eta +
           "</td><td>" + when(s.now_ms, b.created_ms) + "</td></tr>\n";
    }
    o += "</table>\n";
  }

  // Running jobs.
  o += "<h2>Running</h2>\n";
  if (s.running.empty()) {
    o += "<p class=\"muted\">nothing is running</p>\n";
  } else {
    o += "<table id=\"running\">\n<tr><th>job</th><th>model</th><th>daemon</th><th>progress</th><th>tok/s</th>"
         "<th>ETA</th></tr>\n";
    for (const jobs::Job& j : s.running) {
      const jobs::JobProgress& p = j.progress;
      const bool prefill = p.generated == 0 && p.prompt_tokens > 0 && p.prefilled < p.prompt_tokens;
      const int64_t done = prefill ? p.prefilled : p.generated;
      const int64_t max = prefill ? p.prompt_tokens : j.spec.sampling.max_tokens;
      const std::optional<double> eta = jobs::remaining_eta_s(p, s.now_ms);
      o += "<tr class=\"job\" data-job=\"" + std::to_string(j.id) + "\"><td>" + std::to_string(j.id) + " " +
           html_escape(job_label(j)) + "</td><td>" + html_escape(j.spec.model) + "</td><td>" + html_escape(j.worker) +
           "</td><td><progress class=\"job-progress\" value=\"" + std::to_string(done) + "\" max=\"" +
           std::to_string(std::max<int64_t>(max, 1)) + "\"></progress> " + (prefill ? "prefill " : "") +
           std::to_string(done) + "/" + std::to_string(max) + (prefill ? " prompt tok" : " tok") + "</td><td>" +
           (p.tok_s > 0 ? format_rate(p.tok_s) : std::string("-")) + "</td><td>" +
           (eta ? format_duration(*eta) : std::string("-")) + "</td></tr>\n";
    }
    o += "</table>\n";
  }

  // Throughput over time.
  o += "<h2>Throughput, last " +
       format_duration(static_cast<double>(s.history_ms > 0 ? s.history_ms : kHistoryMs) / 1000) + "</h2>\n" +
       chart_svg(s) + "\n";
  if (s.history.empty()) o += "<p class=\"muted\">no job finished in this time</p>\n";

  // Daemons.
  o += "<h2>Daemons</h2>\n";
  if (s.workers.empty()) {
    o += "<p class=\"muted\">no daemon has registered (start nightshiftd; jobs wait until one runs)</p>\n";
  } else {
    std::map<std::string, double> tok_s;
    for (const jobs::Job& j : s.running) tok_s[j.worker] += j.progress.tok_s;
    o += "<table id=\"daemons\">\n<tr><th>daemon</th><th>host</th><th>state</th><th>model</th><th>jobs</th>"
         "<th>tok/s</th><th>heartbeat</th></tr>\n";
    for (const jobs::WorkerInfo& w : s.workers) {
      std::string state;
      if (w.stopped_ms != 0)
        state = "stopped " + when(s.now_ms, w.stopped_ms);
      else if (!worker_live(w, s.now_ms))
        state = "silent for " + format_duration(static_cast<double>(s.now_ms - w.heartbeat_ms) / 1000) +
                " (crashed or hung?)";
      else
        state = "up " + format_duration(static_cast<double>(s.now_ms - w.started_ms) / 1000);
      std::string jobs_text;
      for (int64_t id : w.jobs) jobs_text += (jobs_text.empty() ? "" : " ") + std::to_string(id);
      o += "<tr class=\"daemon\" data-worker=\"" + html_escape(w.id) + "\"><td>" + html_escape(w.id) + "</td><td>" +
           html_escape(w.host) + "</td><td>" + html_escape(state) + "</td><td>" +
           (w.model.empty() ? std::string("-") : html_escape(w.model)) + "</td><td>" +
           (jobs_text.empty() ? std::string("-") : jobs_text) + "</td><td>" +
           (tok_s.count(w.id) ? format_rate(tok_s[w.id]) : std::string("-")) + "</td><td>" +
           when(s.now_ms, w.heartbeat_ms) + "</td></tr>\n";
      if (w.stopped_ms == 0 && !w.problem.empty()) {
        o +=
            "<tr><td></td><td colspan=\"6\" class=\"problem\">cannot serve: " + html_escape(w.problem) + "</td></tr>\n";
      }
    }
    o += "</table>\n";
  }

  // Failures.
  o += "<h2>Last failures</h2>\n";
  if (s.failures.empty()) {
    o += "<p class=\"muted\">none</p>\n";
  } else {
    o += "<table id=\"failures\">\n<tr><th>job</th><th>model</th><th>state</th><th>when</th><th>reason</th></tr>\n";
    for (const jobs::Job& j : s.failures) {
      o += "<tr class=\"failure\" data-job=\"" + std::to_string(j.id) + "\"><td>" + std::to_string(j.id) + " " +
           html_escape(job_label(j)) + "</td><td>" + html_escape(j.spec.model) + "</td><td class=\"" +
           jobs::state_name(j.state) + "\">" + jobs::state_name(j.state) + "</td><td>" + when(s.now_ms, j.finished_ms) +
           "</td><td>" + html_escape((j.error_kind.empty() ? "" : j.error_kind + ": ") + j.error) + "</td></tr>\n";
    }
    o += "</table>\n";
  }
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace ns::daemon
