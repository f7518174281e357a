#include "daemon/lib/job_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ctime>

#include "jobs/result_stats.h"
#include "jobs/time_format.h"

namespace ns::daemon {
namespace {

using nlohmann::json;

json time_or_null(int64_t ms) { return ms == 0 ? json(nullptr) : json(ms); }
json iso_or_null(int64_t ms) { return ms == 0 ? json(nullptr) : json(jobs::iso8601_utc(ms)); }
json text_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// The first `max_chars` UTF-8 characters of `s` on one line.
// The first max_chars characters of s on one line: newlines and tabs as
// spaces, other controls escaped (an escape counts as one character).
std::string preview(const std::string& s, size_t max_chars) {
  std::string flat = s;
  for (char& c : flat) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  const std::string shown = escape_controls(flat, false);
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < shown.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(shown[i]);
    const bool starts_char = (c & 0xC0) != 0x80;
    if (starts_char && chars == max_chars) {
      out += "...";
      break;
    }
    if (starts_char) ++chars;
    out += static_cast<char>(c);
  }
  return out;
}

// "2025-01-31 22:05:09" (UTC) or "-".
std::string short_time(int64_t ms) {
  if (ms == 0) return "-";
  std::string iso = jobs::iso8601_utc(ms);
  iso[10] = ' ';
  return iso.substr(0, 19);
}

// The table is read by a person at a terminal: the machine's local time
// (TZ), to the second; --csv and --json keep UTC.
std::string local_time(int64_t ms) {
  if (ms == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm));
}

size_t display_width(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// What a job continues: its prompt, or a chat job's last message.
std::string input_preview(const jobs::JobSpec& spec) {
  if (!spec.is_chat()) return spec.prompt;
  const json messages = json::parse(spec.messages, nullptr, false);
  if (!messages.is_array() || messages.empty()) return "[chat]";
  const json& last = messages.back();
  return "[chat] " + last.value("role", std::string("?")) + ": " + last.value("content", std::string());
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

std::string escape_controls(std::string_view s, bool keep_layout) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [&out](unsigned v) { out += fmt::format("\\x{:02x}", v); };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (keep_layout && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      hex(static_cast<unsigned char>(s[++i]));  // U+0080..U+009F: C1 controls (CSI is U+009B)
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string json_text(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

json job_to_json(const jobs::Job& job) {
  const SamplingParams& sp = job.spec.sampling;
  json j = {
      {"id", job.id},
      {"state", jobs::state_name(job.state)},
      {"model", job.spec.model},
      {"prompt", text_or_null(job.spec.prompt)},
      {"messages", job.spec.is_chat() ? json::parse(job.spec.messages, nullptr, false) : json(nullptr)},
      {"batch", text_or_null(job.spec.batch)},
      {"custom_id", text_or_null(job.spec.custom_id)},
      {"source_path", text_or_null(job.spec.source_path)},
      {"source_line", job.spec.source_line > 0 ? json(job.spec.source_line) : json(nullptr)},
      {"sampling",
       {{"max_tokens", sp.max_tokens},
        {"temperature", sp.temperature},
        {"top_k", sp.top_k},
        {"top_p", sp.top_p},
        {"min_p", sp.min_p},
        {"repeat_penalty", sp.repeat_penalty},
        {"repeat_last_n", sp.repeat_last_n},
        {"seed", sp.seed},
        {"stop", sp.stop},
        {"ignore_eos", sp.ignore_eos},
        {"grammar", sp.grammar.empty() ? json(nullptr) : json(sp.grammar)}}},
      {"priority", job.spec.priority},
      {"idempotency_key", text_or_null(job.spec.idempotency_key)},
      {"created_ms", time_or_null(job.created_ms)},
      {"created_at", iso_or_null(job.created_ms)},
      {"started_ms", time_or_null(job.started_ms)},
      {"started_at", iso_or_null(job.started_ms)},
      {"finished_ms", time_or_null(job.finished_ms)},
      {"finished_at", iso_or_null(job.finished_ms)},
      {"worker", text_or_null(job.worker)},
      {"attempts", job.attempts},
      {"max_attempts", job.spec.max_attempts},
      {"attempt", job.attempt},
      {"lease_expires_ms", time_or_null(job.lease_expires_ms)},
      {"lease_expires_at", iso_or_null(job.lease_expires_ms)},
      {"not_before_ms", time_or_null(job.spec.not_before_ms)},
      {"not_before_at", iso_or_null(job.spec.not_before_ms)},
      {"cancel_requested", job.cancel_requested},
      {"error_kind", text_or_null(job.error_kind)},
      {"error", text_or_null(job.error)},
      {"held", jobs::is_held(job) ? json(job.error) : json(nullptr)},  // why a daemon left it queued
      {"progress", nullptr},
      {"result", nullptr},
  };
  if (job.progress.updated_ms != 0) {
    j["progress"] = {{"prompt_tokens", job.progress.prompt_tokens},
                     {"prefilled", job.progress.prefilled},
                     {"generated", job.progress.generated},
                     {"tok_s", job.progress.tok_s},
                     // The daemon's ETA as of updated_ms (status counts it down to now).
                     {"eta_s", job.progress.eta_s >= 0 ? json(job.progress.eta_s) : json()},
                     {"updated_ms", job.progress.updated_ms},
                     {"updated_at", iso_or_null(job.progress.updated_ms)}};
  }
  if (job.result) {
    const jobs::JobResult& r = *job.result;
    j["result"] = {
        {"text", r.text},
        {"finish_reason", r.finish_reason},
        {"prompt_tokens", r.prompt_tokens},
        {"completion_tokens", r.completion_tokens},
        {"prompt_tokens_dropped", r.prompt_tokens_dropped},
    };
    for (const jobs::ResultStat& st : jobs::kResultStats) {  // every statistic, under its column's name
      j["result"][st.name] = st.real != nullptr ? json(r.*st.real) : json(r.*st.bytes);
    }
  }
  return j;
}

std::string format_job_csv(const std::vector<jobs::Job>& jobs) {
  // RFC 4180: every field quoted, quotes doubled; text as stored (a spreadsheet shows line breaks in a cell).
  const auto field = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  const auto time = [](int64_t ms) { return ms > 0 ? jobs::iso8601_utc(ms) : std::string(); };
  std::string out =
      "id,state,model,batch,custom_id,priority,created,finished,prompt_tokens,completion_tokens,"
      "decode_tok_s,finish_reason,error_kind,error,text\r\n";
  for (const jobs::Job& j : jobs) {
    const jobs::JobResult* r = j.result ? &*j.result : nullptr;
    const std::vector<std::string> row = {std::to_string(j.id),
                                          jobs::state_name(j.state),
                                          j.spec.model,
                                          j.spec.batch,
                                          j.spec.custom_id,
                                          std::to_string(j.spec.priority),
                                          time(j.created_ms),
                                          time(j.finished_ms),
                                          r ? std::to_string(r->prompt_tokens) : "",
                                          r ? std::to_string(r->completion_tokens) : "",
                                          r ? fmt::format("{:.2f}", r->decode_tok_s) : "",
                                          r ? r->finish_reason : "",
                                          j.error_kind,
                                          j.error,
                                          r ? r->text : ""};
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + field(row[i]);
    out += "\r\n";
  }
  return out;
}

std::string format_job_table(const std::vector<jobs::Job>& jobs) {
  constexpr size_t kColumns = 9;
  using Row = std::array<std::string, kColumns>;
  std::vector<Row> rows = {
      {"ID", "STATE", "MODEL", "BATCH/CUSTOM_ID", "PRI", "CREATED (local)", "TOKENS", "TOK/S", "OUTPUT"}};
  for (const jobs::Job& j : jobs) {
    std::string tokens = "-", tok_s = "-", snippet;
    if (j.result) {
      tokens = std::to_string(j.result->completion_tokens);
      tok_s = fmt::format("{:.2f}", j.result->decode_tok_s);
      snippet = preview(j.result->text, 40);
    }
    if (j.state == jobs::JobState::failed || j.state == jobs::JobState::dead) {
      snippet = preview(j.error_kind + ": " + j.error, 60);
    }
    if (j.state == jobs::JobState::queued) snippet = "> " + preview(input_preview(j.spec), 38);
    if (jobs::is_held(j)) snippet = preview("held: " + j.error, 60);  // the whole reason: below the table
    if (j.state == jobs::JobState::running) {
      snippet = j.progress.updated_ms != 0
                    ? fmt::format("[{}/{} tokens] ", j.progress.generated, j.spec.sampling.max_tokens) +
                          preview(input_preview(j.spec), 24)
                    : "> " + preview(input_preview(j.spec), 38);
    }
    std::string state = jobs::is_held(j) ? "held" : jobs::state_name(j.state);
    if (j.cancel_requested && j.state == jobs::JobState::running) state += "*";  // cancel pending
    std::string batch = j.spec.batch.empty() ? "-" : j.spec.batch;
    if (!j.spec.custom_id.empty()) batch += "/" + j.spec.custom_id;
    rows.push_back({std::to_string(j.id), state, preview(j.spec.model, 40), preview(batch, 32),
                    std::to_string(j.spec.priority), local_time(j.created_ms), tokens, tok_s, snippet});
  }
  std::array<size_t, kColumns> width{};
  for (const Row& r : rows) {
    for (size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], display_width(r[c]));
  }
  std::string out;
  for (const Row& r : rows) {
    std::string line;
    for (size_t c = 0; c < kColumns; ++c) {
      line += r[c];
      if (c + 1 < kColumns) line += std::string(width[c] - display_width(r[c]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {
// Where a cut at byte `at` of UTF-8 `s` falls back to: the start of the character there.
size_t char_start(const std::string& s, size_t at) {
  while (at > 0 && at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

// `text` whole, or (with `cut`, above kShowWholeBytes) its head and tail around a note.
std::string maybe_cut(const std::string& text, bool cut, int64_t id, const char* what) {
  if (!cut || text.size() <= kShowWholeBytes) return text;
  const size_t head = char_start(text, kShowHeadBytes);
  const size_t tail = char_start(text, text.size() - kShowTailBytes);
  return text.substr(0, head) +
         fmt::format("\n[... {} of the {}'s {} bytes not shown; all of it: nightshift show {} --full ...]\n",
                     tail - head, what, text.size(), id) +
         text.substr(tail);
}
}  // namespace

std::string format_job_details(const jobs::Job& job, bool escape, bool cut) {
  const SamplingParams& sp = job.spec.sampling;
  const std::string stop = json_text(json(sp.stop));
  std::string out;
  const auto shown = [escape](const std::string& text) { return escape ? escape_controls(text, true) : text; };
  auto field = [&](const char* name, const std::string& value) {
    out += fmt::format("  {:<17}{}\n", name, value.empty() ? "-" : escape_controls(value, true));
  };
  out += fmt::format("job {}: {}{}\n", job.id, jobs::state_name(job.state),
                     job.cancel_requested && job.state == jobs::JobState::running ? " (cancel requested)" : "");
  field("model", job.spec.model);
  field("priority", std::to_string(job.spec.priority));
  field("idempotency_key", job.spec.idempotency_key);
  if (!job.spec.batch.empty()) {
    field("batch", job.spec.batch + (job.spec.custom_id.empty() ? "" : " (custom_id " + job.spec.custom_id + ")"));
  }
  if (!job.spec.source_path.empty()) {
    field("source", job.spec.source_path +
                        (job.spec.source_line > 0 ? ":" + std::to_string(job.spec.source_line) : std::string()));
  }
  field("created", jobs::iso8601_utc(job.created_ms));
  field("started", jobs::iso8601_utc(job.started_ms));
  field("finished", jobs::iso8601_utc(job.finished_ms));
  field("worker", job.worker);
  field("attempts",
        fmt::format("{} of at most {} (latest claim #{})", job.attempts, job.spec.max_attempts, job.attempt));
  if (job.state == jobs::JobState::running) {
    field("lease_expires", jobs::iso8601_utc(job.lease_expires_ms));
    if (job.progress.updated_ms != 0) {
      field("progress", fmt::format("prompt {}/{}, {} of at most {} tokens, {:.2f} tok/s (as of {})",
                                    job.progress.prefilled, job.progress.prompt_tokens, job.progress.generated,
                                    sp.max_tokens, job.progress.tok_s, short_time(job.progress.updated_ms)));
    }
  }
  if (job.spec.not_before_ms != 0 && job.state == jobs::JobState::queued) {
    field("not_before", jobs::iso8601_utc(job.spec.not_before_ms));
  }
  field("sampling", fmt::format("max_tokens={} temperature={} top_k={} top_p={} min_p={} repeat_penalty={} "
                                "repeat_last_n={} seed={} ignore_eos={} stop={}",
                                sp.max_tokens, sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty,
                                sp.repeat_last_n, sp.seed, sp.ignore_eos, stop));
  if (!sp.grammar.empty()) {
    const size_t rules = static_cast<size_t>(std::count(sp.grammar.begin(), sp.grammar.end(), '\n'));
    field("grammar", fmt::format("{} bytes, {} lines; first: {}", sp.grammar.size(), rules,
                                 sp.grammar.substr(0, std::min(sp.grammar.find('\n'), size_t{100}))));
  }
  if (!job.error.empty()) {
    field(job.state == jobs::JobState::queued ? "last_error" : "error", job.error_kind + ": " + job.error);
  }
  if (job.result) {
    const jobs::JobResult& r = *job.result;
    field("finish_reason", r.finish_reason);
    field("tokens", fmt::format("{} prompt, {} completion", r.prompt_tokens, r.completion_tokens));
    if (r.prompt_tokens_dropped > 0)
      field("prompt_dropped", fmt::format("{} tokens from the front: the document is longer than the context, "
                                          "its tail was continued",
                                          r.prompt_tokens_dropped));
    if (r.prefix_tokens > 0)
      field("prefix_shared",
            fmt::format("{} prompt tokens copied from a prefix another job prefilled", r.prefix_tokens));
    field("queue_wait", fmt::format("{:.0f} ms", r.queue_wait_ms));
    field("load", fmt::format("{:.1f} ms", r.load_ms));
    field("prefill", fmt::format("{:.1f} ms ({:.2f} tok/s)", r.prefill_ms, r.prefill_tok_s));
    field("decode", fmt::format("{:.1f} ms ({:.2f} tok/s)", r.decode_ms, r.decode_tok_s));
    field("peak_rss", mib(r.peak_rss_bytes));
    field("bytes_read", fmt::format("{} ({:.2f} GiB/s while reading)", mib(r.bytes_read), r.read_gib_s));
    field("time", fmt::format("{:.0f} ms waiting for reads, {:.0f} ms computing", r.io_wait_ms, r.compute_ms));
    field("expert_cache",
          fmt::format("{:.1f}% hits, prefetch accuracy {:.1f}%", 100 * r.cache_hit_rate, 100 * r.prefetch_accuracy));
    field("batch_size", fmt::format("{:.1f} jobs decoded together on average", r.avg_batch_size));
    if (r.decode_share_ms > 0 && r.avg_batch_size > 1) {  // the batch's rate, as this job saw it
      field("batch_rate", fmt::format("{:.2f} tok/s over its share of the batch's decoding time ({:.1f} ms)",
                                      r.decode_tok_s * r.decode_ms / r.decode_share_ms, r.decode_share_ms));
    }
  }
  if (job.spec.is_chat()) {
    out += "--- messages ---\n" +
           maybe_cut(json_text(json::parse(job.spec.messages, nullptr, false), 2), cut, job.id, "messages") + "\n";
  } else {
    out += "--- prompt ---\n" + maybe_cut(shown(job.spec.prompt), cut, job.id, "prompt") + "\n";
  }
  if (job.result) out += "--- output ---\n" + maybe_cut(shown(job.result->text), cut, job.id, "output") + "\n";
  return out;
}

json attempts_to_json(const std::vector<jobs::AttemptRecord>& attempts) {
  json arr = json::array();
  for (const jobs::AttemptRecord& a : attempts) {
    arr.push_back({{"attempt", a.attempt},
                   {"worker", a.worker},
                   {"started_ms", time_or_null(a.started_ms)},
                   {"started_at", iso_or_null(a.started_ms)},
                   {"ended_ms", time_or_null(a.ended_ms)},
                   {"ended_at", iso_or_null(a.ended_ms)},
                   {"resumed_tokens", a.resumed_tokens},
                   {"outcome", text_or_null(a.outcome)},
                   {"error_kind", text_or_null(a.error_kind)},
                   {"error", text_or_null(a.error)}});
  }
  return arr;
}

std::string format_attempts(const std::vector<jobs::AttemptRecord>& attempts) {
  if (attempts.empty()) return "";
  std::string out = "--- attempts ---\n";
  for (const jobs::AttemptRecord& a : attempts) {
    out += fmt::format("  #{} {} {} -> {} {}{}{}\n", a.attempt, a.worker, short_time(a.started_ms),
                       short_time(a.ended_ms), a.outcome.empty() ? "running" : a.outcome,
                       a.resumed_tokens > 0 ? fmt::format(" (resumed at token {})", a.resumed_tokens) : "",
                       a.error.empty() ? "" : ": " + preview(a.error_kind + ": " + a.error, 100));
  }
  return out;
}

}  // namespace ns::daemon
