#include "daemon/cli/status_view.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "daemon/cli/batch_export.h"
#include "daemon/cli/progress_format.h"
#include "jobs/time_format.h"
#include "jobs/valid_utf8.h"

namespace ns::cli {
namespace {

// A daemon heartbeats every few seconds while it runs; one quiet for this
// long has most likely died without saying so (kill -9, power cut).
constexpr int64_t kWorkerSilentMs = 3 * 60 * 1000;
// Stopped daemons stay listed this long, then drop out of the report.
constexpr int64_t kStoppedShownMs = 24 * 3600 * 1000;

bool in_prefill(const jobs::Job& job) {
  const jobs::JobProgress& p = job.progress;
  return p.updated_ms != 0 && p.generated == 0 && p.prompt_tokens > 0 && p.prefilled < p.prompt_tokens;
}

// Text from a job (a prompt, a random model's output) shown on one terminal
// line: invalid UTF-8 becomes U+FFFD and control characters (line breaks,
// escape sequences) become spaces, so it can neither break the layout nor
// drive the terminal; cut to about max_chars bytes on a character boundary.
std::string one_line(std::string_view text, size_t max_chars) {
  std::string out = jobs::to_valid_utf8(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (out.size() > max_chars) {
    size_t cut = max_chars - 3;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    out = out.substr(0, cut) + "...";
  }
  return out;
}

// "reviews-0412 req-7", "notes notes/one.md@3f2a..." or the start of the prompt.
std::string job_label(const jobs::Job& job, size_t max_chars) {
  if (!job.spec.batch.empty()) {
    return one_line(job.spec.batch + (job.spec.custom_id.empty() ? "" : " " + job.spec.custom_id), max_chars);
  }
  const std::string& text = job.spec.is_chat() ? job.spec.messages : job.spec.prompt;
  return "\"" + one_line(text, max_chars - 2) + "\"";
}

std::string counts_text(const jobs::QueueCounts& c) {
  std::string s = std::to_string(c.queued) + " queued";
  if (c.retry_waiting > 0) s += " (" + std::to_string(c.retry_waiting) + " waiting to retry)";
  s += ", " + std::to_string(c.running) + " running, " + std::to_string(c.done) + " done, " + std::to_string(c.failed) +
       " failed, " + std::to_string(c.cancelled) + " cancelled, " + std::to_string(c.dead) + " dead";
  return s;
}

bool shown_worker(const jobs::WorkerInfo& w, int64_t now_ms) {
  return w.stopped_ms == 0 || now_ms - w.stopped_ms < kStoppedShownMs;
}

std::string job_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace

StatusSnapshot take_status(jobs::Queue& queue, const std::string& batch, int recent_limit, int batch_limit) {
  StatusSnapshot s;
  s.batch = batch;
  s.counts = batch.empty() ? queue.counts() : queue.counts(batch);
  jobs::ListFilter running;
  running.state = jobs::JobState::running;
  running.batch = batch;
  running.limit = 0;
  running.order = jobs::ListFilter::Order::oldest_first;
  s.running = queue.list(running);
  jobs::ListFilter recent;
  recent.batch = batch;
  recent.limit = recent_limit;
  recent.order = jobs::ListFilter::Order::recently_finished;
  if (recent_limit > 0) s.recent = queue.list(recent);
  if (batch_limit > 0) {
    // One batch: found among all of them (the interface has no lookup by name).
    s.batches = queue.batches(batch.empty() ? batch_limit : std::numeric_limits<int32_t>::max());
    if (!batch.empty()) std::erase_if(s.batches, [&](const jobs::BatchSummary& b) { return b.name != batch; });
  }
  s.workers = queue.workers();
  s.now_ms = jobs::now_epoch_ms();
  return s;
}

std::string job_progress_text(const jobs::Job& job, int64_t now_ms) {
  const jobs::JobProgress& p = job.progress;
  if (p.updated_ms == 0) {
    return "started " + ago(now_ms, job.started_ms) + ", waiting for its first progress report";
  }
  if (in_prefill(job)) {
    return "prefill " + std::to_string(p.prefilled) + "/" + std::to_string(p.prompt_tokens) + " prompt tok";
  }
  std::string s = std::to_string(p.generated) + "/" + std::to_string(job.spec.sampling.max_tokens) + " tok";
  if (p.tok_s > 0) {
    s += ", " + format_rate(p.tok_s) + " tok/s";
    if (auto eta = eta_seconds(p.generated, job.spec.sampling.max_tokens, p.tok_s)) {
      s += ", ETA " + format_duration(*eta);  // to max_tokens: an end-of-text token may come sooner
    }
  }
  return s;
}

std::string worker_state_text(const jobs::WorkerInfo& w, int64_t now_ms) {
  if (w.stopped_ms != 0) return "stopped " + ago(now_ms, w.stopped_ms);
  if (now_ms - w.heartbeat_ms > kWorkerSilentMs) {
    return "silent for " + format_duration((now_ms - w.heartbeat_ms) / 1000.0) + " (crashed or hung?)";
  }
  return "up " + format_duration((now_ms - w.started_ms) / 1000.0);
}

std::string format_status(const StatusSnapshot& s, const StatusStyle& style) {
  std::ostringstream o;
  const int width = std::max(style.width, 60);
  o << (s.batch.empty() ? "queue: " : "batch " + s.batch + ": ") << counts_text(s.counts) << "\n";

  o << "\nrunning:";
  if (s.running.empty()) o << " none";
  o << "\n";
  for (const jobs::Job& j : s.running) {
    o << "  job " << j.id << "  " << j.spec.model << "  " << job_label(j, 40) << "  (" << j.worker << ")\n    ";
    if (style.bars && j.progress.updated_ms != 0) {
      const int bar = std::clamp(width / 3, 10, 40);
      if (in_prefill(j)) {
        o << "prefill " << progress_bar(j.progress.prefilled, j.progress.prompt_tokens, bar) << " ";
      } else {
        o << "decode  " << progress_bar(j.progress.generated, j.spec.sampling.max_tokens, bar) << " ";
      }
    }
    o << job_progress_text(j, s.now_ms) << "\n";
  }

  o << "\nlast finished:";
  if (s.recent.empty()) o << " none";
  o << "\n";
  for (const jobs::Job& j : s.recent) {
    o << "  job " << j.id << "  " << jobs::state_name(j.state) << "  " << ago(s.now_ms, j.finished_ms);
    if (j.result) {
      o << "  " << j.result->completion_tokens << " tok";
      if (j.result->decode_tok_s > 0) o << ", " << format_rate(j.result->decode_tok_s) << " tok/s";
    }
    if (j.state == jobs::JobState::done && j.result) {
      o << "  \"" << one_line(j.result->text, static_cast<size_t>(std::max(width - 52, 20))) << "\"";
    } else if (!j.error.empty()) {
      o << "  " << one_line((j.error_kind.empty() ? "" : j.error_kind + ": ") + j.error,
                            static_cast<size_t>(std::max(width - 40, 20)));
    }
    o << "\n";
  }

  if (!s.batches.empty()) {
    o << "\nbatches:\n";
    for (const jobs::BatchSummary& b : s.batches) {
      const jobs::QueueCounts& c = b.counts;
      const int64_t total = c.queued + c.running + c.done + c.failed + c.cancelled + c.dead;
      const int64_t finished = c.done + c.failed + c.cancelled + c.dead;
      o << "  " << b.name << "  " << finished << "/" << total << " finished";
      if (style.bars) o << " " << progress_bar(finished, total, 20);
      o << "  (" << describe_counts(c) << ")";
      o << (b.finished_ms != 0 ? "  complete " + ago(s.now_ms, b.finished_ms) : "  created " + ago(s.now_ms, b.created_ms))
        << "\n";
    }
  }

  std::vector<const jobs::WorkerInfo*> fleet;
  for (const jobs::WorkerInfo& w : s.workers) {
    if (shown_worker(w, s.now_ms)) fleet.push_back(&w);
  }
  o << "\ndaemons:";
  if (fleet.empty()) o << " none has registered (start nightshiftd; jobs wait until one runs)";
  o << "\n";
  for (const jobs::WorkerInfo* w : fleet) {
    o << "  " << w->id << "  " << worker_state_text(*w, s.now_ms);
    if (w->stopped_ms == 0) {
      o << "  model " << (w->model.empty() ? "(none loaded)" : w->model);
      if (!w->jobs.empty()) o << "  jobs " << job_ids(w->jobs);
      o << "  heartbeat " << ago(s.now_ms, w->heartbeat_ms);
    }
    if (!w->version.empty()) o << "  version " << w->version;
    o << "\n";
    if (w->stopped_ms == 0 && !w->problem.empty()) o << "    CANNOT SERVE: " << w->problem << "\n";
  }
  return o.str();
}

std::string format_status_line(const StatusSnapshot& s) {
  std::string line = jobs::iso8601_utc(s.now_ms) + " " + (s.batch.empty() ? "" : "batch " + s.batch + ": ") +
                     counts_text(s.counts);
  for (const jobs::Job& j : s.running) line += " | job " + std::to_string(j.id) + " " + job_progress_text(j, s.now_ms);
  return line;
}

nlohmann::json status_to_json(const StatusSnapshot& s) {
  using nlohmann::json;
  auto counts = [](const jobs::QueueCounts& c) {
    return json{{"queued", c.queued}, {"running", c.running}, {"done", c.done},           {"failed", c.failed},
                {"cancelled", c.cancelled}, {"dead", c.dead}, {"retry_waiting", c.retry_waiting}};
  };
  json running = json::array();
  for (const jobs::Job& j : s.running) {
    const jobs::JobProgress& p = j.progress;
    const auto eta = eta_seconds(p.generated, j.spec.sampling.max_tokens, p.tok_s);
    running.push_back({{"id", j.id},
                       {"model", j.spec.model},
                       {"batch", j.spec.batch.empty() ? json() : json(j.spec.batch)},
                       {"custom_id", j.spec.custom_id.empty() ? json() : json(j.spec.custom_id)},
                       {"worker", j.worker},
                       {"started_ms", j.started_ms},
                       {"prompt_tokens", p.prompt_tokens},
                       {"prefilled", p.prefilled},
                       {"generated", p.generated},
                       {"max_tokens", j.spec.sampling.max_tokens},
                       {"tok_s", p.tok_s},
                       {"eta_s", eta && p.updated_ms != 0 && !in_prefill(j) ? json(*eta) : json()},
                       {"progress_ms", p.updated_ms == 0 ? json() : json(p.updated_ms)}});
  }
  json recent = json::array();
  for (const jobs::Job& j : s.recent) {
    recent.push_back({{"id", j.id},
                      {"state", jobs::state_name(j.state)},
                      {"finished_ms", j.finished_ms},
                      {"completion_tokens", j.result ? json(j.result->completion_tokens) : json()},
                      {"decode_tok_s", j.result ? json(j.result->decode_tok_s) : json()},
                      {"error", j.error.empty() ? json() : json(j.error_kind + ": " + j.error)}});
  }
  json batches = json::array();
  for (const jobs::BatchSummary& b : s.batches) {
    batches.push_back({{"name", b.name},
                       {"created_ms", b.created_ms},
                       {"finished_ms", b.finished_ms == 0 ? json() : json(b.finished_ms)},
                       {"counts", counts(b.counts)}});
  }
  json workers = json::array();
  for (const jobs::WorkerInfo& w : s.workers) {
    workers.push_back({{"id", w.id},
                       {"host", w.host},
                       {"pid", w.pid},
                       {"model", w.model},
                       {"version", w.version},
                       {"started_ms", w.started_ms},
                       {"heartbeat_ms", w.heartbeat_ms},
                       {"stopped_ms", w.stopped_ms == 0 ? json() : json(w.stopped_ms)},
                       {"state", worker_state_text(w, s.now_ms)},
                       {"problem", w.problem.empty() ? json() : json(w.problem)},
                       {"jobs", w.jobs}});
  }
  return {{"now_ms", s.now_ms},
          {"batch", s.batch.empty() ? json() : json(s.batch)},
          {"counts", counts(s.counts)},
          {"running", running},
          {"recent", recent},
          {"batches", batches},
          {"workers", workers}};
}

}  // namespace ns::cli
