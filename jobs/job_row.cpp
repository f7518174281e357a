// Decoding queue rows for both backends (contract in jobs/job_row.h).
#include "jobs/job_row.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <charconv>

namespace ns::jobs {

const char* const kSelectJob = R"(
SELECT j.id, j.model, j.prompt, j.max_tokens, j.temperature, j.top_k, j.top_p, j.min_p,
       j.repeat_penalty, j.repeat_last_n, j.seed, j.stop, j.ignore_eos, j.priority,
       j.idempotency_key, j.state, j.created_ms, j.started_ms, j.finished_ms, j.worker,
       j.attempts, j.cancel_requested, j.error_kind, j.error,
       r.job_id, r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens,
       r.queue_wait_ms, r.load_ms, r.prefill_ms, r.decode_ms, r.prefill_tok_s, r.decode_tok_s,
       r.peak_rss_bytes, r.bytes_read,
       j.attempt, j.lease_expires_ms, j.max_attempts, j.not_before_ms,
       j.messages, j.batch, j.custom_id, j.source_path, j.source_line,
       j.progress_prompt_tokens, j.progress_prefilled, j.progress_generated, j.progress_tok_s, j.progress_ms,
       r.read_gib_s, r.io_wait_ms, r.compute_ms, r.cache_hit_rate, r.prefetch_accuracy, r.avg_batch_size,
       j.run_alone, j.grammar, j.n, j.top_logprobs, r.choices, r.logprobs, r.prompt_tokens_dropped
FROM jobs AS j LEFT JOIN results AS r ON r.job_id = j.id
)";

const char* const kSelectWorkers = R"(
SELECT id, host, pid, model, version, started_ms, heartbeat_ms, stopped_ms, jobs, problem FROM workers
ORDER BY stopped_ms IS NOT NULL, heartbeat_ms DESC, id)";

double stored_real(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form of the float
  double d = v;
  std::from_chars(buf, r.ptr, d);
  return d;
}

std::string stop_to_json(const std::vector<std::string>& stop) {
  try {
    return nlohmann::json(stop).dump();
  } catch (const nlohmann::json::type_error& e) {  // JSON text cannot hold invalid UTF-8
    throw Error(ErrorKind::invalid_input, std::string("a stop string is not valid UTF-8: ") + e.what());
  }
}

std::vector<std::string> stop_from_json(const std::string& text, int64_t id, const std::string& db) {
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + db + ": job " + std::to_string(id) +
                                   " has a stop column that is not a JSON array of strings (" + text +
                                   "): " + e.what());
  }
}

JobState state_from_column(const std::string& s, int64_t id, const std::string& db) {
  if (auto st = parse_state(s)) return *st;
  throw DatabaseError(false, "database " + db + ": job " + std::to_string(id) + " has unknown state '" + s + "'");
}

std::string choices_to_json(const std::vector<JobChoice>& choices) {
  if (choices.empty()) return "";
  nlohmann::json a = nlohmann::json::array();
  for (const JobChoice& c : choices)
    a.push_back({{"text", c.text}, {"finish_reason", c.finish_reason}, {"completion_tokens", c.completion_tokens}});
  // Generated text may hold a multi-byte character cut in two: stored with U+FFFD, as results.text is.
  return a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<JobChoice> choices_from_json(const std::string& text, int64_t id, const std::string& db) {
  std::vector<JobChoice> out;
  if (text.empty()) return out;
  try {
    for (const nlohmann::json& c : nlohmann::json::parse(text))
      out.push_back({c.at("text").get<std::string>(), c.at("finish_reason").get<std::string>(),
                     c.at("completion_tokens").get<int32_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + db + ": job " + std::to_string(id) +
                                   " has a results.choices column that is not a JSON array of "
                                   "{text, finish_reason, completion_tokens}: " + e.what());
  }
  return out;
}

std::string token_lists_to_json(const std::vector<std::vector<int32_t>>& lists) {
  return lists.empty() ? "" : nlohmann::json(lists).dump();
}

std::vector<std::vector<int32_t>> token_lists_from_json(const std::string& text, int64_t id, const std::string& db) {
  if (text.empty()) return {};
  try {
    return nlohmann::json::parse(text).get<std::vector<std::vector<int32_t>>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + db + ": the checkpoint of job " + std::to_string(id) +
                                   " has a choices column that is not a JSON array of token id arrays: " + e.what() +
                                   "; delete the row from `checkpoints` and the job starts over");
  }
}

Job read_job(const Row& row, const std::string& db) {
  auto i32 = [&](int col) { return static_cast<int32_t>(row.int64(col)); };
  auto f32 = [&](int col) { return static_cast<float>(row.real(col)); };
  Job job;
  job.id = row.int64(0);
  job.spec.model = row.text(1);
  job.spec.prompt = row.text(2);
  SamplingParams& sp = job.spec.sampling;
  sp.max_tokens = i32(3);
  sp.temperature = f32(4);
  sp.top_k = i32(5);
  sp.top_p = f32(6);
  sp.min_p = f32(7);
  sp.repeat_penalty = f32(8);
  sp.repeat_last_n = i32(9);
  sp.seed = std::bit_cast<uint64_t>(row.int64(10));
  sp.stop = stop_from_json(row.text(11), job.id, db);
  sp.ignore_eos = row.boolean(12);
  job.spec.priority = i32(13);
  job.spec.idempotency_key = row.text(14);
  job.state = state_from_column(row.text(15), job.id, db);
  job.created_ms = row.int64(16);
  job.started_ms = row.int64(17);  // NULL reads as 0 = "not yet"
  job.finished_ms = row.int64(18);
  job.worker = row.text(19);
  job.attempts = i32(20);
  job.cancel_requested = row.boolean(21);
  job.error_kind = row.text(22);
  job.error = row.text(23);
  if (!row.is_null(24)) {
    JobResult r;
    r.text = row.text(25);
    r.finish_reason = row.text(26);
    r.prompt_tokens = i32(27);
    r.completion_tokens = i32(28);
    r.queue_wait_ms = row.real(29);
    r.load_ms = row.real(30);
    r.prefill_ms = row.real(31);
    r.decode_ms = row.real(32);
    r.prefill_tok_s = row.real(33);
    r.decode_tok_s = row.real(34);
    r.peak_rss_bytes = static_cast<uint64_t>(row.int64(35));
    r.bytes_read = static_cast<uint64_t>(row.int64(36));
    r.read_gib_s = row.real(51);
    r.io_wait_ms = row.real(52);
    r.compute_ms = row.real(53);
    r.cache_hit_rate = row.real(54);
    r.prefetch_accuracy = row.real(55);
    r.avg_batch_size = row.real(56);
    r.more_choices = choices_from_json(row.text(61), job.id, db);
    r.logprobs = row.text(62);
    r.prompt_tokens_dropped = i32(63);
    job.result = std::move(r);
  }
  job.attempt = i32(37);
  job.lease_expires_ms = row.int64(38);
  job.spec.max_attempts = i32(39);
  job.spec.not_before_ms = row.int64(40);
  job.spec.messages = row.text(41);
  job.spec.batch = row.text(42);
  job.spec.custom_id = row.text(43);
  job.spec.source_path = row.text(44);
  job.spec.source_line = i32(45);
  job.progress.prompt_tokens = i32(46);
  job.progress.prefilled = i32(47);
  job.progress.generated = i32(48);
  job.progress.tok_s = row.real(49);
  job.progress.updated_ms = row.int64(50);
  job.run_alone = row.boolean(57);
  sp.grammar = row.text(58);
  sp.n = i32(59);
  sp.logprobs = !row.is_null(60);
  sp.top_logprobs = i32(60);
  return job;
}

AttemptRecord read_attempt(const Row& row, int first) {
  AttemptRecord a;
  a.attempt = static_cast<int32_t>(row.int64(first));
  a.worker = row.text(first + 1);
  a.started_ms = row.int64(first + 2);
  a.ended_ms = row.int64(first + 3);
  a.resumed_tokens = static_cast<int32_t>(row.int64(first + 4));
  a.outcome = row.text(first + 5);
  a.error_kind = row.text(first + 6);
  a.error = row.text(first + 7);
  return a;
}

std::string final_states_csv(const std::vector<JobState>& states) {
  std::string list;
  for (JobState s : states) {
    if (s == JobState::queued || s == JobState::running) continue;
    list += (list.empty() ? "" : ",") + std::string(state_name(s));
  }
  return list;
}

WorkerInfo read_worker(const Row& row) {
  WorkerInfo w;
  w.id = row.text(0);
  w.host = row.text(1);
  w.pid = row.int64(2);
  w.model = row.text(3);
  w.version = row.text(4);
  w.started_ms = row.int64(5);
  w.heartbeat_ms = row.int64(6);
  w.stopped_ms = row.int64(7);
  w.problem = row.text(9);  // column 8, jobs, is read by the backend (JSON text or an array)
  return w;
}

}  // namespace ns::jobs
