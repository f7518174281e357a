// The SQLite backend of ns::jobs::Queue (contract in jobs/queue.h, tables in
// schema/sqlite/). Every write is one BEGIN IMMEDIATE transaction; reads that
// decide a write are repeated inside that transaction, so several processes
// can share one file without double claims or lost updates.
#include <nlohmann/json.hpp>

#include <bit>
#include <string>

#include "engine/util/error.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/time_format.h"

namespace ns::jobs {
namespace {

using sqlite::Db;
using sqlite::Stmt;
using sqlite::WriteTransaction;

// Column order shared by the SELECT below and read_job().
constexpr const char* kSelectJob = R"(
SELECT j.id, j.model, j.prompt, j.max_tokens, j.temperature, j.top_k, j.top_p, j.min_p,
       j.repeat_penalty, j.repeat_last_n, j.seed, j.stop, j.ignore_eos, j.priority,
       j.idempotency_key, j.state, j.created_ms, j.started_ms, j.finished_ms, j.worker,
       j.attempts, j.cancel_requested, j.error_kind, j.error,
       r.job_id, r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens,
       r.queue_wait_ms, r.load_ms, r.prefill_ms, r.decode_ms, r.prefill_tok_s, r.decode_tok_s,
       r.peak_rss_bytes, r.bytes_read
FROM jobs AS j LEFT JOIN results AS r ON r.job_id = j.id
)";

std::string stop_to_json(const std::vector<std::string>& stop) {
  try {
    return nlohmann::json(stop).dump();
  } catch (const nlohmann::json::type_error& e) {  // JSON text cannot hold invalid UTF-8
    throw Error(ErrorKind::invalid_input, std::string("a stop string is not valid UTF-8: ") + e.what());
  }
}

std::vector<std::string> stop_from_json(const std::string& text, int64_t id, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::database, "database " + path + ": job " + std::to_string(id) +
                                         " has a stop column that is not a JSON array of strings (" +
                                         text + "): " + e.what());
  }
}

JobState state_from_column(const std::string& s, int64_t id, const std::string& path) {
  if (auto st = parse_state(s)) return *st;
  throw Error(ErrorKind::database,
              "database " + path + ": job " + std::to_string(id) + " has unknown state '" + s + "'");
}

Job read_job(const Stmt& st, const std::string& path) {
  Job job;
  job.id = st.int64(0);
  job.spec.model = st.text(1);
  job.spec.prompt = st.text(2);
  SamplingParams& sp = job.spec.sampling;
  sp.max_tokens = static_cast<int32_t>(st.int64(3));
  sp.temperature = static_cast<float>(st.real(4));
  sp.top_k = static_cast<int32_t>(st.int64(5));
  sp.top_p = static_cast<float>(st.real(6));
  sp.min_p = static_cast<float>(st.real(7));
  sp.repeat_penalty = static_cast<float>(st.real(8));
  sp.repeat_last_n = static_cast<int32_t>(st.int64(9));
  sp.seed = std::bit_cast<uint64_t>(st.int64(10));
  sp.stop = stop_from_json(st.text(11), job.id, path);
  sp.ignore_eos = st.int64(12) != 0;
  job.spec.priority = static_cast<int32_t>(st.int64(13));
  job.spec.idempotency_key = st.text(14);
  job.state = state_from_column(st.text(15), job.id, path);
  job.created_ms = st.int64(16);
  job.started_ms = st.int64(17);   // NULL reads as 0 = "not yet"
  job.finished_ms = st.int64(18);
  job.worker = st.text(19);
  job.attempts = static_cast<int32_t>(st.int64(20));
  job.cancel_requested = st.int64(21) != 0;
  job.error_kind = st.text(22);
  job.error = st.text(23);
  if (!st.is_null(24)) {
    JobResult r;
    r.text = st.text(25);
    r.finish_reason = st.text(26);
    r.prompt_tokens = static_cast<int32_t>(st.int64(27));
    r.completion_tokens = static_cast<int32_t>(st.int64(28));
    r.queue_wait_ms = st.real(29);
    r.load_ms = st.real(30);
    r.prefill_ms = st.real(31);
    r.decode_ms = st.real(32);
    r.prefill_tok_s = st.real(33);
    r.decode_tok_s = st.real(34);
    r.peak_rss_bytes = static_cast<uint64_t>(st.int64(35));
    r.bytes_read = static_cast<uint64_t>(st.int64(36));
    job.result = std::move(r);
  }
  return job;
}

void validate_spec(const JobSpec& spec) {
  if (spec.model.empty()) {
    throw Error(ErrorKind::invalid_input, "the job names no model; give one of the names under `models:` in "
                                          "the daemon's config");
  }
  if (spec.prompt.empty()) {
    throw Error(ErrorKind::invalid_input, "the job's prompt is empty; give the text to continue");
  }
  if (std::string problem = spec.sampling.validate(); !problem.empty()) {
    throw Error(ErrorKind::invalid_input, "invalid sampling parameters: " + problem);
  }
  stop_to_json(spec.sampling.stop);  // throws for stop strings that are not UTF-8
}

class SqliteQueue final : public Queue {
 public:
  explicit SqliteQueue(const std::string& path) : db_(path) { sqlite::migrate(db_); }

  SubmitOutcome submit(const JobSpec& spec) override {
    validate_spec(spec);
    WriteTransaction tx(db_);
    if (!spec.idempotency_key.empty()) {
      auto find = db_.cached("SELECT id FROM jobs WHERE idempotency_key = ?1");
      find->bind(1, spec.idempotency_key);
      if (find->step()) return {find->int64(0), false};  // nothing written: the rollback is a no-op
    }
    const int64_t now = now_epoch_ms();
    const SamplingParams& sp = spec.sampling;
    auto ins = db_.cached(R"(
      INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                        repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key,
                        created_ms, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16))");
    ins->bind(1, spec.model)
        .bind(2, spec.prompt)
        .bind(3, int64_t{sp.max_tokens})
        .bind(4, double{sp.temperature})
        .bind(5, int64_t{sp.top_k})
        .bind(6, double{sp.top_p})
        .bind(7, double{sp.min_p})
        .bind(8, double{sp.repeat_penalty})
        .bind(9, int64_t{sp.repeat_last_n})
        .bind(10, std::bit_cast<int64_t>(sp.seed))
        .bind(11, stop_to_json(sp.stop))
        .bind(12, int64_t{sp.ignore_eos ? 1 : 0})
        .bind(13, int64_t{spec.priority})
        .bind_text_or_null(14, spec.idempotency_key)
        .bind(15, now)
        .bind(16, iso8601_utc(now));
    ins->run();
    const int64_t id = db_.last_insert_rowid();
    tx.commit();
    return {id, true};
  }

  std::optional<Job> claim(const std::string& worker) override {
    static constexpr const char* kBest =
        "SELECT id FROM jobs WHERE state = 'queued' ORDER BY priority DESC, id LIMIT 1";
    // Idle daemons poll: look without the write lock first, so polling never
    // blocks submitters.
    if (!db_.cached(kBest)->step()) return std::nullopt;

    WriteTransaction tx(db_);
    int64_t id = 0;
    {
      auto best = db_.cached(kBest);
      if (!best->step()) return std::nullopt;  // another worker took it meanwhile
      id = best->int64(0);
    }
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(R"(
      UPDATE jobs SET state = 'running', worker = ?2, attempts = attempts + 1,
                      started_ms = ?3, started_at = ?4
      WHERE id = ?1)");
    up->bind(1, id).bind(2, worker).bind(3, now).bind(4, iso8601_utc(now));
    up->run();
    std::optional<Job> job = load(id);
    tx.commit();
    return job;
  }

  void complete(int64_t id, const JobResult& result) override {
    finish(id, "complete", "done", nullptr, nullptr, &result);
  }

  void fail(int64_t id, const std::string& error_kind, const std::string& message) override {
    finish(id, "fail", "failed", &error_kind, &message, nullptr);
  }

  void finish_cancelled(int64_t id, const JobResult& partial) override {
    finish(id, "finish as cancelled", "cancelled", nullptr, nullptr, &partial);
  }

  void release(int64_t id) override {
    WriteTransaction tx(db_);
    require_running(id, "release");
    auto req = db_.cached("SELECT cancel_requested FROM jobs WHERE id = ?1");
    req->bind(1, id);
    const bool cancel_was_requested = req->step() && req->int64(0) != 0;
    if (cancel_was_requested) {
      set_final_state(id, "cancelled", nullptr, nullptr);
    } else {
      auto up = db_.cached(R"(
        UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL,
                        attempts = max(attempts - 1, 0)
        WHERE id = ?1)");
      up->bind(1, id).run();
    }
    tx.commit();
  }

  bool cancel(int64_t id) override {
    WriteTransaction tx(db_);
    const std::optional<std::string> state = state_of(id);
    if (state == "queued") {
      set_final_state(id, "cancelled", nullptr, nullptr);
    } else if (state == "running") {
      auto up = db_.cached("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1");
      up->bind(1, id).run();
    } else {
      return false;  // unknown or already final; nothing written
    }
    tx.commit();
    return true;
  }

  bool cancel_requested(int64_t id) override {
    auto st = db_.cached("SELECT cancel_requested FROM jobs WHERE id = ?1");
    st->bind(1, id);
    return st->step() && st->int64(0) != 0;
  }

  int64_t requeue_abandoned(const std::string& worker) override {
    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    auto cancel = db_.cached(R"(
      UPDATE jobs SET state = 'cancelled', finished_ms = ?2, finished_at = ?3
      WHERE state = 'running' AND worker = ?1 AND cancel_requested = 1)");
    cancel->bind(1, worker).bind(2, now).bind(3, iso8601_utc(now)).run();
    int64_t n = db_.changes();
    auto requeue = db_.cached(R"(
      UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL
      WHERE state = 'running' AND worker = ?1)");
    requeue->bind(1, worker).run();
    n += db_.changes();
    tx.commit();
    return n;
  }

  std::optional<Job> get(int64_t id) override { return load(id); }

  std::vector<Job> list(const ListFilter& filter) override {
    std::string sql = kSelectJob;
    if (filter.state) sql += " WHERE j.state = ?1";
    sql += " ORDER BY j.id DESC LIMIT ?2";
    auto st = db_.cached(sql);
    if (filter.state) st->bind(1, state_name(*filter.state));
    st->bind(2, int64_t{filter.limit > 0 ? filter.limit : -1});  // SQLite: negative = no limit
    std::vector<Job> jobs;
    while (st->step()) jobs.push_back(read_job(*st, db_.path()));
    return jobs;
  }

  QueueCounts counts() override {
    QueueCounts c;
    auto st = db_.cached("SELECT state, count(*) FROM jobs GROUP BY state");
    while (st->step()) {
      const std::string state = st->text(0);
      const int64_t n = st->int64(1);
      switch (state_from_column(state, 0, db_.path())) {
        case JobState::queued: c.queued = n; break;
        case JobState::running: c.running = n; break;
        case JobState::done: c.done = n; break;
        case JobState::failed: c.failed = n; break;
        case JobState::cancelled: c.cancelled = n; break;
      }
    }
    return c;
  }

 private:
  std::optional<Job> load(int64_t id) {
    auto st = db_.cached(std::string(kSelectJob) + " WHERE j.id = ?1");
    st->bind(1, id);
    if (!st->step()) return std::nullopt;
    return read_job(*st, db_.path());
  }

  std::optional<std::string> state_of(int64_t id) {
    auto st = db_.cached("SELECT state FROM jobs WHERE id = ?1");
    st->bind(1, id);
    if (!st->step()) return std::nullopt;
    return st->text(0);
  }

  // Inside a write transaction: throws unless the job exists and is running.
  void require_running(int64_t id, const char* action) {
    const std::optional<std::string> state = state_of(id);
    if (!state) {
      throw Error(ErrorKind::invalid_input, "cannot " + std::string(action) + " job " + std::to_string(id) +
                                                ": no such job in " + db_.path());
    }
    if (*state != "running") {
      throw Error(ErrorKind::invalid_input, "cannot " + std::string(action) + " job " + std::to_string(id) +
                                                ": it is " + *state + ", not running (was the row changed "
                                                "by hand or by another worker?)");
    }
  }

  void set_final_state(int64_t id, const char* state, const std::string* error_kind, const std::string* error) {
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(R"(
      UPDATE jobs SET state = ?2, finished_ms = ?3, finished_at = ?4, error_kind = ?5, error = ?6
      WHERE id = ?1)");
    up->bind(1, id).bind(2, state).bind(3, now).bind(4, iso8601_utc(now));
    if (error_kind != nullptr) {
      up->bind(5, *error_kind).bind(6, *error);
    } else {
      up->bind_null(5).bind_null(6);
    }
    up->run();
  }

  void write_result(int64_t id, const JobResult& r) {
    auto ins = db_.cached(R"(
      INSERT OR REPLACE INTO results (job_id, text, finish_reason, prompt_tokens, completion_tokens,
                                      queue_wait_ms, load_ms, prefill_ms, decode_ms, prefill_tok_s,
                                      decode_tok_s, peak_rss_bytes, bytes_read)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13))");
    ins->bind(1, id)
        .bind(2, r.text)
        .bind(3, r.finish_reason)
        .bind(4, int64_t{r.prompt_tokens})
        .bind(5, int64_t{r.completion_tokens})
        .bind(6, r.queue_wait_ms)
        .bind(7, r.load_ms)
        .bind(8, r.prefill_ms)
        .bind(9, r.decode_ms)
        .bind(10, r.prefill_tok_s)
        .bind(11, r.decode_tok_s)
        .bind(12, static_cast<int64_t>(r.peak_rss_bytes))
        .bind(13, static_cast<int64_t>(r.bytes_read));
    ins->run();
  }

  void finish(int64_t id, const char* action, const char* state, const std::string* error_kind,
              const std::string* error, const JobResult* result) {
    WriteTransaction tx(db_);
    require_running(id, action);
    set_final_state(id, state, error_kind, error);
    if (result != nullptr) write_result(id, *result);
    tx.commit();
  }

  Db db_;
};

}  // namespace

std::unique_ptr<Queue> open_sqlite_queue(const std::string& path) { return std::make_unique<SqliteQueue>(path); }

}  // namespace ns::jobs
