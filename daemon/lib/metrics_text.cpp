#include "daemon/lib/metrics_text.h"
#include "common/utf8.h"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace ns::daemon {
namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Whole numbers (counts, bytes) as integers, not "8e+09"; exact below 2^53.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

class Writer {
 public:
  // A family's HELP and TYPE lines.
  void family(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::vector<std::pair<const char*, std::string>>& labels, double value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ += (i ? "," : "") + std::string(labels[i].first) + "=\"" + escape_label_value(labels[i].second) + "\"";
      }
      out_ += '}';
    }
    out_ += " " + number(value) + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string escape_label_value(std::string_view value) {
  const std::string valid = to_valid_utf8(value);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

StatusRequest metrics_request() {
  StatusRequest r;
  r.recent_limit = 0;
  r.batch_limit = 0;
  r.totals = true;
  return r;
}

std::string metrics_text(const StatusSnapshot& s) {
  Writer w;
  using L = std::vector<std::pair<const char*, std::string>>;
  const auto per_model = [&](const char* name, const char* type, const char* help, auto&& value) {
    w.family(name, type, help);
    for (const jobs::ModelTotals& m : s.models) {
      if (auto v = value(m)) w.sample(name, L{{"model", m.model}}, *v);
    }
  };
  using Opt = std::optional<double>;
  const auto ratio = [](double num, double den) { return den > 0 ? Opt(num / den) : Opt(); };

  w.family("nightshift_jobs", "gauge", "Jobs in the queue by model and state.");
  for (const jobs::ModelTotals& m : s.models) {
    const jobs::QueueCounts& c = m.jobs;
    const std::pair<const char*, int64_t> states[] = {{"queued", c.queued},       {"running", c.running},
                                                      {"done", c.done},           {"failed", c.failed},
                                                      {"cancelled", c.cancelled}, {"dead", c.dead}};
    for (const auto& [state, n] : states)
      w.sample("nightshift_jobs", L{{"model", m.model}, {"state", state}}, static_cast<double>(n));
  }
  w.family("nightshift_jobs_retry_waiting", "gauge", "Queued jobs waiting out a retry backoff after a failed attempt.");
  w.sample("nightshift_jobs_retry_waiting", {}, static_cast<double>(s.counts.retry_waiting));

  per_model("nightshift_results_total", "counter", "Jobs with a result (done, or cancelled with a partial one).",
            [](const jobs::ModelTotals& m) { return Opt(static_cast<double>(m.results)); });
  per_model("nightshift_tokens_generated_total", "counter", "Completion tokens of the results in the queue.",
            [](const jobs::ModelTotals& m) { return Opt(static_cast<double>(m.completion_tokens)); });
  per_model("nightshift_prompt_tokens_total", "counter", "Prompt tokens of the results in the queue.",
            [](const jobs::ModelTotals& m) { return Opt(static_cast<double>(m.prompt_tokens)); });
  per_model("nightshift_decode_tokens_per_second", "gauge",
            "Completion tokens over the wall time their batches spent decoding them.", [&](const jobs::ModelTotals& m) {
              return ratio(static_cast<double>(m.completion_tokens), m.decode_share_ms / 1000);
            });

  // Live figures of the daemons: their running jobs' rates, and how many run together.
  std::map<std::string, double> tok_s;
  for (const jobs::Job& j : s.running) tok_s[j.worker] += j.progress.tok_s;
  const auto live = [&](const jobs::WorkerInfo& wi) { return worker_live(wi, s.now_ms); };
  w.family("nightshift_tokens_per_second", "gauge", "Decode rate of the jobs a daemon runs now (tokens per second).");
  for (const jobs::WorkerInfo& wi : s.workers) {
    if (live(wi)) w.sample("nightshift_tokens_per_second", L{{"worker", wi.id}}, tok_s[wi.id]);
  }
  w.family("nightshift_batch_size", "gauge", "Jobs a daemon runs together now.");
  for (const jobs::WorkerInfo& wi : s.workers) {
    if (live(wi)) w.sample("nightshift_batch_size", L{{"worker", wi.id}}, static_cast<double>(wi.jobs.size()));
  }
  per_model("nightshift_batch_size_mean", "gauge", "Jobs decoded together, mean weighted by completion tokens.",
            [&](const jobs::ModelTotals& m) {
    return ratio(m.batch_size_x_tokens, static_cast<double>(m.completion_tokens));
  });

  per_model("nightshift_read_bytes_total", "counter", "Weight bytes read from disk for the results in the queue.",
            [](const jobs::ModelTotals& m) { return Opt(static_cast<double>(m.bytes_read)); });
  per_model("nightshift_read_bytes_per_second", "gauge",
            "Weight bytes read over the engine time (I/O wait plus compute) of the same steps.",
            [&](const jobs::ModelTotals& m) {
    return ratio(static_cast<double>(m.bytes_read), (m.io_wait_ms + m.compute_ms) / 1000);
  });
  per_model("nightshift_io_wait_ratio", "gauge", "Share of the engine time spent waiting for weight reads.",
            [&](const jobs::ModelTotals& m) { return ratio(m.io_wait_ms, m.io_wait_ms + m.compute_ms); });
  per_model("nightshift_expert_cache_hit_ratio", "gauge", "Expert-cache hit rate, mean weighted by completion tokens.",
            [&](const jobs::ModelTotals& m) {
    return ratio(m.cache_hit_rate_x_tokens, static_cast<double>(m.completion_tokens));
  });

  w.family("nightshift_queue_wait_seconds", "summary", "Time from submit to the claim that produced the result.");
  for (const jobs::ModelTotals& m : s.models) {
    if (m.results == 0) continue;
    w.sample("nightshift_queue_wait_seconds_sum", L{{"model", m.model}}, m.queue_wait_ms / 1000);
    w.sample("nightshift_queue_wait_seconds_count", L{{"model", m.model}}, static_cast<double>(m.results));
  }

  w.family("nightshift_worker_up", "gauge", "1 for a daemon running with a recent heartbeat, else 0.");
  for (const jobs::WorkerInfo& wi : s.workers) w.sample("nightshift_worker_up", L{{"worker", wi.id}}, live(wi) ? 1 : 0);
  w.family("nightshift_worker_heartbeat_timestamp_seconds", "gauge", "A daemon's last heartbeat, in unix time.");
  for (const jobs::WorkerInfo& wi : s.workers) {
    w.sample("nightshift_worker_heartbeat_timestamp_seconds", L{{"worker", wi.id}},
             static_cast<double>(wi.heartbeat_ms) / 1000);
  }
  return w.take();
}

}  // namespace ns::daemon
