// Decoding queue rows for both backends (contract in jobs/job_row.h).
#include "jobs/job_row.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <charconv>
#include <iterator>
#include <string_view>

#include "jobs/result_stats.h"
#include "jobs/valid_utf8.h"

namespace ns::jobs {

namespace {

// The job SELECT's columns, read by name (col()) rather than by position; the
// result statistics (jobs/result_stats.h) follow them.
constexpr std::string_view kJobColumns[] = {
    "j.id",
    "j.model",
    "j.prompt",
    "j.max_tokens",
    "j.temperature",
    "j.top_k",
    "j.top_p",
    "j.min_p",
    "j.repeat_penalty",
    "j.repeat_last_n",
    "j.seed",
    "j.stop",
    "j.ignore_eos",
    "j.priority",
    "j.idempotency_key",
    "j.state",
    "j.created_ms",
    "j.started_ms",
    "j.finished_ms",
    "j.worker",
    "j.attempts",
    "j.cancel_requested",
    "j.error_kind",
    "j.error",
    "r.job_id",
    "r.text",
    "r.finish_reason",
    "r.prompt_tokens",
    "r.completion_tokens",
    "j.attempt",
    "j.lease_expires_ms",
    "j.max_attempts",
    "j.not_before_ms",
    "j.messages",
    "j.batch",
    "j.custom_id",
    "j.source_path",
    "j.source_line",
    "j.progress_prompt_tokens",
    "j.progress_prefilled",
    "j.progress_generated",
    "j.progress_tok_s",
    "j.progress_ms",
    "j.progress_eta_s",
    "j.run_alone",
    "j.grammar",
    "j.n",
    "j.top_logprobs",
    "r.choices",
    "r.logprobs",
    "r.prompt_tokens_dropped",
};
constexpr int kFirstStat = static_cast<int>(std::size(kJobColumns));

// The position of `name` in the SELECT; a name not in it does not compile.
consteval int col(std::string_view name) {
  for (size_t i = 0; i < std::size(kJobColumns); ++i)
    if (kJobColumns[i] == name) return static_cast<int>(i);
  throw "not a column of the job SELECT";
}

std::string select_job_sql() {
  std::string sql = "\nSELECT ";
  for (std::string_view c : kJobColumns) sql += std::string(c) + ", ";
  return sql + result_stat_columns("r.") + "\nFROM jobs AS j LEFT JOIN results AS r ON r.job_id = j.id\n";
}

const std::string kSelectJobSql = select_job_sql();

}  // namespace

const char* const kSelectJob = kSelectJobSql.c_str();

const char* list_order_sql(ListFilter::Order order) {
  switch (order) {
    case ListFilter::Order::newest_first: return " ORDER BY j.id DESC";
    case ListFilter::Order::oldest_first: return " ORDER BY j.id";
    case ListFilter::Order::recently_finished:
      return " AND j.finished_ms IS NOT NULL ORDER BY j.finished_ms DESC, j.id DESC";
  }
  return " ORDER BY j.id DESC";  // not reached: every order is above
}

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
    a.push_back({{"text", storable_text(c.text)},  // the rule results.text follows (jobs/valid_utf8.h)
                 {"finish_reason", c.finish_reason},
                 {"completion_tokens", c.completion_tokens}});
  return a.dump();
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
                                   "{text, finish_reason, completion_tokens}: " +
                                   e.what());
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
  auto i32 = [&](int c) { return static_cast<int32_t>(row.int64(c)); };
  auto f32 = [&](int c) { return static_cast<float>(row.real(c)); };
  Job job;
  job.id = row.int64(col("j.id"));
  job.spec.model = row.text(col("j.model"));
  job.spec.prompt = row.text(col("j.prompt"));
  SamplingParams& sp = job.spec.sampling;
  sp.max_tokens = i32(col("j.max_tokens"));
  sp.temperature = f32(col("j.temperature"));
  sp.top_k = i32(col("j.top_k"));
  sp.top_p = f32(col("j.top_p"));
  sp.min_p = f32(col("j.min_p"));
  sp.repeat_penalty = f32(col("j.repeat_penalty"));
  sp.repeat_last_n = i32(col("j.repeat_last_n"));
  sp.seed = std::bit_cast<uint64_t>(row.int64(col("j.seed")));
  sp.stop = stop_from_json(row.text(col("j.stop")), job.id, db);
  sp.ignore_eos = row.boolean(col("j.ignore_eos"));
  job.spec.priority = i32(col("j.priority"));
  job.spec.idempotency_key = row.text(col("j.idempotency_key"));
  job.state = state_from_column(row.text(col("j.state")), job.id, db);
  job.created_ms = row.int64(col("j.created_ms"));
  job.started_ms = row.int64(col("j.started_ms"));  // NULL reads as 0 = "not yet"
  job.finished_ms = row.int64(col("j.finished_ms"));
  job.worker = row.text(col("j.worker"));
  job.attempts = i32(col("j.attempts"));
  job.cancel_requested = row.boolean(col("j.cancel_requested"));
  job.error_kind = row.text(col("j.error_kind"));
  job.error = row.text(col("j.error"));
  if (!row.is_null(col("r.job_id"))) {
    JobResult r;
    r.text = row.text(col("r.text"));
    r.finish_reason = row.text(col("r.finish_reason"));
    r.prompt_tokens = i32(col("r.prompt_tokens"));
    r.completion_tokens = i32(col("r.completion_tokens"));
    int c = kFirstStat;
    for (const ResultStat& st : kResultStats) {
      if (st.real != nullptr)
        r.*st.real = row.real(c++);
      else
        r.*st.bytes = static_cast<uint64_t>(row.int64(c++));
    }
    r.more_choices = choices_from_json(row.text(col("r.choices")), job.id, db);
    r.logprobs = row.text(col("r.logprobs"));
    r.prompt_tokens_dropped = i32(col("r.prompt_tokens_dropped"));
    job.result = std::move(r);
  }
  job.attempt = i32(col("j.attempt"));
  job.lease_expires_ms = row.int64(col("j.lease_expires_ms"));
  job.spec.max_attempts = i32(col("j.max_attempts"));
  job.spec.not_before_ms = row.int64(col("j.not_before_ms"));
  job.spec.messages = row.text(col("j.messages"));
  job.spec.batch = row.text(col("j.batch"));
  job.spec.custom_id = row.text(col("j.custom_id"));
  job.spec.source_path = row.text(col("j.source_path"));
  job.spec.source_line = i32(col("j.source_line"));
  job.progress.prompt_tokens = i32(col("j.progress_prompt_tokens"));
  job.progress.prefilled = i32(col("j.progress_prefilled"));
  job.progress.generated = i32(col("j.progress_generated"));
  job.progress.tok_s = row.real(col("j.progress_tok_s"));
  job.progress.updated_ms = row.int64(col("j.progress_ms"));
  job.progress.eta_s = row.is_null(col("j.progress_eta_s")) ? -1 : row.real(col("j.progress_eta_s"));
  job.run_alone = row.boolean(col("j.run_alone"));
  sp.grammar = row.text(col("j.grammar"));
  sp.n = i32(col("j.n"));
  sp.logprobs = !row.is_null(col("j.top_logprobs"));
  sp.top_logprobs = i32(col("j.top_logprobs"));
  return job;
}

AttemptRecord read_attempt(const Row& row, int first) {
  using A = AttemptRecord;
  return read_columns<A>(row, first, &A::attempt, &A::worker, &A::started_ms, &A::ended_ms, &A::resumed_tokens,
                         &A::outcome, &A::error_kind, &A::error);
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
  using W = WorkerInfo;
  W w = read_columns<W>(row, 0, &W::id, &W::host, &W::pid, &W::model, &W::version, &W::started_ms, &W::heartbeat_ms,
                        &W::stopped_ms);
  w.problem = row.text(9);  // column 8, jobs, is read by the backend (JSON text or an array)
  return w;
}

const char* const kSelectMigrationMark = R"(
    SELECT source, keep_ids, started_ms, updated_ms, finished_ms, last_source_id, copied, skipped
    FROM queue_migrations )";

Queue::MigrationMark read_migration_mark(const Row& row) {
  using M = Queue::MigrationMark;
  return read_columns<M>(row, 0, &M::source, &M::keep_ids, &M::started_ms, &M::updated_ms, &M::finished_ms,
                         &M::last_source_id, &M::copied, &M::skipped);
}

}  // namespace ns::jobs
