// The SQLite backend of ns::jobs::Queue (contract in jobs/queue.h, tables in
// schema/sqlite/). Every write is one BEGIN IMMEDIATE transaction; reads that
// decide a write are repeated inside that transaction, so several processes
// can share one file without double claims or lost updates. Worker writes
// are fenced by `WHERE state = 'running' AND worker = ? AND attempt = ?`.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <string>

#include "engine/util/error.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue.h"
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
       r.peak_rss_bytes, r.bytes_read,
       j.attempt, j.lease_expires_ms, j.max_attempts, j.not_before_ms,
       j.messages, j.batch, j.custom_id, j.source_path, j.source_line,
       j.progress_prompt_tokens, j.progress_prefilled, j.progress_generated, j.progress_tok_s, j.progress_ms,
       r.read_gib_s, r.io_wait_ms, r.compute_ms, r.cache_hit_rate, r.prefetch_accuracy, r.avg_batch_size
FROM jobs AS j LEFT JOIN results AS r ON r.job_id = j.id
)";

// The fence of every worker write: ?1 job id, ?2 worker, ?3 attempt.
constexpr const char* kFence = " WHERE id = ?1 AND state = 'running' AND worker = ?2 AND attempt = ?3";

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
    throw DatabaseError(false, "database " + path + ": job " + std::to_string(id) +
                                   " has a stop column that is not a JSON array of strings (" + text +
                                   "): " + e.what());
  }
}

// Token ids, job ids: a JSON array of integers.
template <class Int>
std::string ints_to_json(std::span<const Int> values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(values[i]);
  }
  return s + "]";
}

std::vector<int32_t> tokens_from_json(const std::string& text, int64_t id, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<int32_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + path + ": the checkpoint of job " + std::to_string(id) +
                                   " is not a JSON array of token ids: " + e.what() +
                                   "; delete the row from `checkpoints` and the job starts over");
  }
}

std::vector<int64_t> ids_from_json(const std::string& text, const std::string& worker, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + path + ": worker " + worker +
                                   " has a jobs column that is not a JSON array of job ids: " + e.what());
  }
}

JobState state_from_column(const std::string& s, int64_t id, const std::string& path) {
  if (auto st = parse_state(s)) return *st;
  throw DatabaseError(false, "database " + path + ": job " + std::to_string(id) + " has unknown state '" + s + "'");
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
    r.read_gib_s = st.real(51);
    r.io_wait_ms = st.real(52);
    r.compute_ms = st.real(53);
    r.cache_hit_rate = st.real(54);
    r.prefetch_accuracy = st.real(55);
    r.avg_batch_size = st.real(56);
    job.result = std::move(r);
  }
  job.attempt = static_cast<int32_t>(st.int64(37));
  job.lease_expires_ms = st.int64(38);
  job.spec.max_attempts = static_cast<int32_t>(st.int64(39));
  job.spec.not_before_ms = st.int64(40);
  job.spec.messages = st.text(41);
  job.spec.batch = st.text(42);
  job.spec.custom_id = st.text(43);
  job.spec.source_path = st.text(44);
  job.spec.source_line = static_cast<int32_t>(st.int64(45));
  job.progress.prompt_tokens = static_cast<int32_t>(st.int64(46));
  job.progress.prefilled = static_cast<int32_t>(st.int64(47));
  job.progress.generated = static_cast<int32_t>(st.int64(48));
  job.progress.tok_s = st.real(49);
  job.progress.updated_ms = st.int64(50);
  return job;
}

void validate_spec(const JobSpec& spec, const std::string& which = "") {
  if (std::string problem = spec_problem(spec); !problem.empty()) {
    throw Error(ErrorKind::invalid_input, which + problem);
  }
}

// How an attempt ended, for the attempts table.
struct AttemptEnd {
  const char* outcome;
  const std::string* error_kind = nullptr;
  const std::string* error = nullptr;
};

// A running job whose worker is gone, as recovery sees it.
struct Orphan {
  int64_t id = 0;
  int32_t attempt = 0, attempts = 0, max_attempts = 1;
  bool cancel_requested = false;
  std::string worker;
  int64_t lease_expires_ms = 0;
};

class SqliteQueue final : public Queue {
 public:
  SqliteQueue(const std::string& path, const SqliteOptions& options) : db_(path, options) {
    // Check before migrating: a damaged file must not be rewritten.
    if (const std::string problems = db_.integrity_problems(options.integrity_check); !problems.empty()) {
      const char* check = options.integrity_check == IntegrityCheck::full ? "integrity_check" : "quick_check";
      throw DatabaseError(false, "database " + path + " failed PRAGMA " + check + ": " + problems +
                                     "; stop every nightshift process, keep a copy of the file, then rebuild it "
                                     "with `sqlite3 " + path + " .recover | sqlite3 recovered.db` (see "
                                     "docs/operations.md)");
    }
    sqlite::migrate(db_);
  }

  // ---- submitting -------------------------------------------------------------

  SubmitOutcome submit(const JobSpec& spec) override {
    validate_spec(spec);
    WriteTransaction tx(db_);
    const SubmitOutcome out = insert(spec);
    if (out.created) tx.commit();  // else nothing was written: the rollback is a no-op
    return out;
  }

  std::vector<SubmitOutcome> submit_many(std::span<const JobSpec> specs) override {
    for (size_t i = 0; i < specs.size(); ++i) validate_spec(specs[i], "job " + std::to_string(i + 1) + ": ");
    std::vector<SubmitOutcome> out;
    out.reserve(specs.size());
    WriteTransaction tx(db_);
    for (const JobSpec& spec : specs) out.push_back(insert(spec));
    tx.commit();
    return out;
  }

  // ---- the worker's side ------------------------------------------------------

  std::optional<Job> claim(const std::string& worker, int64_t lease_ms) override {
    static constexpr const char* kBest = R"(
      SELECT id FROM jobs WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= ?1)
      ORDER BY priority DESC, id LIMIT 1)";
    // Idle daemons poll: look without the write lock first, so polling never
    // blocks submitters.
    if (!db_.cached(kBest)->bind(1, now_epoch_ms()).step()) return std::nullopt;

    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    int64_t id = 0;
    {
      auto best = db_.cached(kBest);
      if (!best->bind(1, now).step()) return std::nullopt;  // another worker took it meanwhile
      id = best->int64(0);
    }
    std::optional<Job> job = claim_id(id, worker, lease_ms, now);
    tx.commit();
    return job;
  }

  using Queue::claim_batch;
  std::vector<Job> claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs, const std::string& model,
                               const std::vector<std::string>& servable) override {
    static constexpr const char* kHead = R"(
      SELECT id, model FROM jobs WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= ?1)
        AND (?3 IS NULL OR model IN (SELECT value FROM json_each(?3)))
      ORDER BY priority DESC, id LIMIT ?2)";
    std::vector<Job> out;
    if (max_jobs <= 0) return out;
    const std::string models = servable.empty() ? std::string() : nlohmann::json(servable).dump();
    // Idle poll: look without the write lock first.
    if (!db_.cached(kHead)->bind(1, now_epoch_ms()).bind(2, int64_t{1}).bind_text_or_null(3, models).step()) {
      return out;
    }

    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    std::vector<int64_t> ids;
    {
      auto head = db_.cached(kHead);
      head->bind(1, now).bind(2, int64_t{max_jobs}).bind_text_or_null(3, models);
      std::string want = model;
      while (head->step()) {
        const std::string m = head->text(1);
        if (want.empty()) want = m;
        if (m != want) break;  // never jump a job ahead in the queue
        ids.push_back(head->int64(0));
      }
    }
    for (int64_t id : ids) out.push_back(*claim_id(id, worker, lease_ms, now));
    tx.commit();
    return out;
  }

  using Queue::heartbeat;
  bool heartbeat(const Lease& lease, int64_t lease_ms, const std::optional<JobProgress>& progress) override {
    WriteTransaction tx(db_);
    if (!extend_lease(lease, lease_ms)) return false;
    if (progress) {
      const int64_t now = now_epoch_ms();
      auto up = db_.cached(R"(
        UPDATE jobs SET progress_prompt_tokens = ?2, progress_prefilled = ?3, progress_generated = ?4,
                        progress_tok_s = ?5, progress_ms = ?6, progress_at = ?7
        WHERE id = ?1)");
      up->bind(1, lease.job_id)
          .bind(2, int64_t{progress->prompt_tokens})
          .bind(3, int64_t{progress->prefilled})
          .bind(4, int64_t{progress->generated})
          .bind(5, progress->tok_s)
          .bind(6, now)
          .bind(7, iso8601_utc(now));
      up->run();
    }
    tx.commit();
    return true;
  }

  bool save_checkpoint(const Lease& lease, std::span<const int32_t> tokens, int64_t lease_ms) override {
    WriteTransaction tx(db_);
    if (!extend_lease(lease, lease_ms)) return false;
    const int64_t now = now_epoch_ms();
    auto put = db_.cached(R"(
      INSERT OR REPLACE INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms, saved_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6))");
    put->bind(1, lease.job_id)
        .bind(2, int64_t{lease.attempt})
        .bind(3, static_cast<int64_t>(tokens.size()))
        .bind(4, ints_to_json(tokens))
        .bind(5, now)
        .bind(6, iso8601_utc(now));
    put->run();
    tx.commit();
    return true;
  }

  std::optional<Checkpoint> checkpoint(int64_t id) override {
    auto st = db_.cached("SELECT attempt, tokens, saved_ms FROM checkpoints WHERE job_id = ?1");
    st->bind(1, id);
    if (!st->step()) return std::nullopt;
    Checkpoint c;
    c.attempt = static_cast<int32_t>(st->int64(0));
    c.tokens = tokens_from_json(st->text(1), id, db_.path());
    c.saved_ms = st->int64(2);
    return c;
  }

  bool complete(const Lease& lease, const JobResult& result) override {
    WriteTransaction tx(db_);
    if (!end_running(lease, "done", nullptr, nullptr)) return false;
    write_result(lease.job_id, result);
    end_attempt(lease, {"done"});
    tx.commit();
    return true;
  }

  bool fail(const Lease& lease, const std::string& error_kind, const std::string& message) override {
    WriteTransaction tx(db_);
    if (!end_running(lease, "failed", &error_kind, &message)) return false;
    end_attempt(lease, {"failed", &error_kind, &message});
    tx.commit();
    return true;
  }

  std::optional<JobState> fail_transient(const Lease& lease, const std::string& error_kind,
                                         const std::string& message, const Backoff& backoff) override {
    WriteTransaction tx(db_);
    std::optional<Orphan> job = running_under(lease);
    if (!job) return std::nullopt;
    end_attempt(lease, {"transient_error", &error_kind, &message});
    const JobState state = requeue_or_bury(*job, error_kind, message, backoff);
    tx.commit();
    return state;
  }

  bool finish_cancelled(const Lease& lease, const JobResult& partial) override {
    WriteTransaction tx(db_);
    if (!end_running(lease, "cancelled", nullptr, nullptr)) return false;
    write_result(lease.job_id, partial);
    end_attempt(lease, {"cancelled"});
    tx.commit();
    return true;
  }

  bool release(const Lease& lease) override {
    WriteTransaction tx(db_);
    std::optional<Orphan> job = running_under(lease);
    if (!job) return false;
    if (job->cancel_requested) {
      end_running(lease, "cancelled", nullptr, nullptr);
      end_attempt(lease, {"cancelled"});
    } else {
      auto up = db_.cached(std::string(R"(
        UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL,
                        lease_expires_ms = NULL, lease_expires_at = NULL, attempts = max(attempts - 1, 0))") +
                           kFence);
      bind_fence(*up, lease).run();
      end_attempt(lease, {"released"});
    }
    tx.commit();
    return true;
  }

  // ---- recovery ---------------------------------------------------------------

  Recovery recover_expired(const Backoff& backoff) override {
    static constexpr const char* kExpired =
        "SELECT id FROM jobs WHERE state = 'running' AND lease_expires_ms < ?1 LIMIT 1";
    // Called on every idle poll: look without the write lock first.
    if (!db_.cached(kExpired)->bind(1, now_epoch_ms()).step()) return {};
    WriteTransaction tx(db_);
    const Recovery r = recover(orphans("lease_expires_ms < ?1", now_epoch_ms(), ""), "lease_expired", backoff);
    tx.commit();
    return r;
  }

  Recovery recover_worker(const std::string& worker, const Backoff& backoff) override {
    if (!db_.cached("SELECT id FROM jobs WHERE state = 'running' AND worker = ?1 LIMIT 1")->bind(1, worker).step()) {
      return {};
    }
    WriteTransaction tx(db_);
    const Recovery r = recover(orphans("worker = ?2", 0, worker), "abandoned", backoff);
    tx.commit();
    return r;
  }

  // ---- people's side ----------------------------------------------------------

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

  RetryOutcome retry(int64_t id) override {
    WriteTransaction tx(db_);
    const std::optional<std::string> state = state_of(id);
    if (!state) return RetryOutcome::not_found;
    if (*state != "failed" && *state != "dead" && *state != "cancelled") return RetryOutcome::not_retryable;
    auto up = db_.cached(R"(
      UPDATE jobs SET state = 'queued', attempts = 0, worker = NULL, started_ms = NULL, started_at = NULL,
                      finished_ms = NULL, finished_at = NULL, error_kind = NULL, error = NULL,
                      cancel_requested = 0, not_before_ms = NULL, not_before_at = NULL,
                      lease_expires_ms = NULL, lease_expires_at = NULL
      WHERE id = ?1)");
    up->bind(1, id).run();
    db_.cached("DELETE FROM results WHERE job_id = ?1")->bind(1, id).run();
    drop_checkpoint(id);
    tx.commit();
    return RetryOutcome::requeued;
  }

  std::optional<Job> get(int64_t id) override { return load(id); }

  std::vector<Job> list(const ListFilter& filter) override {
    std::string sql = kSelectJob;
    sql += " WHERE (?1 IS NULL OR j.state = ?1) AND (?3 IS NULL OR j.batch = ?3)";
    switch (filter.order) {
      case ListFilter::Order::newest_first: sql += " ORDER BY j.id DESC"; break;
      case ListFilter::Order::oldest_first: sql += " ORDER BY j.id"; break;
      case ListFilter::Order::recently_finished:
        sql += " AND j.finished_ms IS NOT NULL ORDER BY j.finished_ms DESC, j.id DESC";
        break;
    }
    sql += " LIMIT ?2";
    auto st = db_.cached(sql);
    if (filter.state) {
      st->bind(1, state_name(*filter.state));
    } else {
      st->bind_null(1);
    }
    st->bind(2, int64_t{filter.limit > 0 ? filter.limit : -1});  // SQLite: negative = no limit
    st->bind_text_or_null(3, filter.batch);
    std::vector<Job> jobs;
    while (st->step()) jobs.push_back(read_job(*st, db_.path()));
    return jobs;
  }

  std::vector<AttemptRecord> attempts(int64_t id) override {
    auto st = db_.cached(R"(
      SELECT attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
      FROM attempts WHERE job_id = ?1 ORDER BY attempt)");
    st->bind(1, id);
    std::vector<AttemptRecord> out;
    while (st->step()) {
      AttemptRecord a;
      a.attempt = static_cast<int32_t>(st->int64(0));
      a.worker = st->text(1);
      a.started_ms = st->int64(2);
      a.ended_ms = st->int64(3);
      a.resumed_tokens = static_cast<int32_t>(st->int64(4));
      a.outcome = st->text(5);
      a.error_kind = st->text(6);
      a.error = st->text(7);
      out.push_back(std::move(a));
    }
    return out;
  }

  QueueCounts counts() override { return counts_where(""); }
  QueueCounts counts(const std::string& batch) override { return counts_where(batch); }

  std::vector<BatchSummary> batches(int32_t limit) override {
    auto st = db_.cached(R"(
      SELECT batch, min(created_ms), max(finished_ms), sum(state IN ('queued', 'running')) FROM jobs
      WHERE batch IS NOT NULL GROUP BY batch ORDER BY min(created_ms) DESC, batch LIMIT ?1)");
    st->bind(1, int64_t{limit > 0 ? limit : -1});
    std::vector<BatchSummary> out;
    while (st->step()) {
      BatchSummary b;
      b.name = st->text(0);
      b.created_ms = st->int64(1);
      b.finished_ms = st->int64(3) == 0 ? st->int64(2) : 0;
      out.push_back(std::move(b));
    }
    for (BatchSummary& b : out) b.counts = counts_where(b.name);
    return out;
  }

  // ---- the fleet ----------------------------------------------------------------

  void register_worker(const WorkerInfo& info) override {
    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(R"(
      INSERT OR REPLACE INTO workers (id, host, pid, model, version, started_ms, started_at, heartbeat_ms,
                                      heartbeat_at, stopped_ms, stopped_at, jobs)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6, ?7, NULL, NULL, ?8))");
    up->bind(1, info.id)
        .bind(2, info.host)
        .bind(3, info.pid)
        .bind(4, info.model)
        .bind(5, info.version)
        .bind(6, now)
        .bind(7, iso8601_utc(now))
        .bind(8, ints_to_json(std::span<const int64_t>(info.jobs)));
    up->run();
    tx.commit();
  }

  void worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs) override {
    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(
        "UPDATE workers SET heartbeat_ms = ?2, heartbeat_at = ?3, model = ?4, jobs = ?5, stopped_ms = NULL, "
        "stopped_at = NULL WHERE id = ?1");
    up->bind(1, id).bind(2, now).bind(3, iso8601_utc(now)).bind(4, model).bind(5, ints_to_json(jobs));
    up->run();
    tx.commit();
  }

  void worker_stopped(const std::string& id) override {
    WriteTransaction tx(db_);
    const int64_t now = now_epoch_ms();
    auto up = db_.cached("UPDATE workers SET stopped_ms = ?2, stopped_at = ?3, jobs = '[]' WHERE id = ?1");
    up->bind(1, id).bind(2, now).bind(3, iso8601_utc(now));
    up->run();
    tx.commit();
  }

  std::vector<WorkerInfo> workers() override {
    auto st = db_.cached(R"(
      SELECT id, host, pid, model, version, started_ms, heartbeat_ms, stopped_ms, jobs FROM workers
      ORDER BY stopped_ms IS NOT NULL, heartbeat_ms DESC, id)");
    std::vector<WorkerInfo> out;
    while (st->step()) {
      WorkerInfo w;
      w.id = st->text(0);
      w.host = st->text(1);
      w.pid = st->int64(2);
      w.model = st->text(3);
      w.version = st->text(4);
      w.started_ms = st->int64(5);
      w.heartbeat_ms = st->int64(6);
      w.stopped_ms = st->int64(7);
      w.jobs = ids_from_json(st->text(8), w.id, db_.path());
      out.push_back(std::move(w));
    }
    return out;
  }

  // ---- copying a queue (nightshift migrate-queue; added with the PostgreSQL backend) ----

  std::vector<JobCopy> export_jobs(int64_t after_id, int32_t limit) override {
    auto st = db_.cached(std::string(kSelectJob) + " WHERE j.id > ?1 ORDER BY j.id LIMIT ?2");
    st->bind(1, after_id).bind(2, int64_t{std::max<int32_t>(limit, 1)});
    std::vector<JobCopy> out;
    while (st->step()) out.push_back({read_job(*st, db_.path()), {}, std::nullopt});
    for (JobCopy& c : out) {
      c.history = attempts(c.job.id);
      c.checkpoint = checkpoint(c.job.id);
    }
    return out;
  }

  std::vector<SubmitOutcome> import_jobs(std::span<const JobCopy> copies, bool keep_ids) override {
    std::vector<SubmitOutcome> out;
    out.reserve(copies.size());
    WriteTransaction tx(db_);
    for (const JobCopy& c : copies) {
      if (!keep_ids) break;
      auto taken = db_.cached("SELECT 1 FROM jobs WHERE id = ?1");
      taken->bind(1, c.job.id);
      if (taken->step()) {
        throw DatabaseError(false, "database " + db_.path() + " already has a job " + std::to_string(c.job.id) +
                                       "; copy into an empty queue to keep the ids, or append under new ids");
      }
    }
    for (const JobCopy& c : copies) out.push_back(import_one(c, keep_ids));
    tx.commit();
    return out;
  }

 private:
  // Inside a write transaction: one exported job, as it was (AUTOINCREMENT
  // keeps later ids above an id inserted explicitly).
  SubmitOutcome import_one(const JobCopy& c, bool keep_ids) {
    const Job& j = c.job;
    if (!j.spec.idempotency_key.empty()) {
      auto find = db_.cached("SELECT id FROM jobs WHERE idempotency_key = ?1");
      find->bind(1, j.spec.idempotency_key);
      if (find->step()) return {find->int64(0), false};
    }
    const SamplingParams& sp = j.spec.sampling;
    auto ins = db_.cached(R"(
      INSERT INTO jobs (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                        repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state,
                        created_ms, created_at, started_ms, started_at, finished_ms, finished_at, worker,
                        attempts, cancel_requested, error_kind, error, max_attempts, attempt,
                        lease_expires_ms, lease_expires_at, not_before_ms, not_before_at,
                        messages, batch, custom_id, source_path, source_line,
                        progress_prompt_tokens, progress_prefilled, progress_generated, progress_tok_s,
                        progress_ms, progress_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
              ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38,
              ?39, ?40, ?41, ?42, ?43, ?44))");
    // Optional times bind NULL for 0 in both columns.
    auto bind_time = [&](int index, int64_t ms) {
      if (ms != 0) {
        ins->bind(index, ms).bind(index + 1, iso8601_utc(ms));
      } else {
        ins->bind_null(index).bind_null(index + 1);
      }
    };
    if (keep_ids) {
      ins->bind(1, j.id);
    } else {
      ins->bind_null(1);
    }
    ins->bind(2, j.spec.model)
        .bind_text_or_null(3, j.spec.prompt)
        .bind(4, int64_t{sp.max_tokens})
        .bind(5, double{sp.temperature})
        .bind(6, int64_t{sp.top_k})
        .bind(7, double{sp.top_p})
        .bind(8, double{sp.min_p})
        .bind(9, double{sp.repeat_penalty})
        .bind(10, int64_t{sp.repeat_last_n})
        .bind(11, std::bit_cast<int64_t>(sp.seed))
        .bind(12, stop_to_json(sp.stop))
        .bind(13, int64_t{sp.ignore_eos ? 1 : 0})
        .bind(14, int64_t{j.spec.priority})
        .bind_text_or_null(15, j.spec.idempotency_key)
        .bind(16, state_name(j.state))
        .bind(17, j.created_ms)
        .bind(18, iso8601_utc(j.created_ms));
    bind_time(19, j.started_ms);
    bind_time(21, j.finished_ms);
    ins->bind_text_or_null(23, j.worker)
        .bind(24, int64_t{j.attempts})
        .bind(25, int64_t{j.cancel_requested ? 1 : 0})
        .bind_text_or_null(26, j.error_kind)
        .bind_text_or_null(27, j.error)
        .bind(28, int64_t{j.spec.max_attempts})
        .bind(29, int64_t{j.attempt});
    bind_time(30, j.lease_expires_ms);
    bind_time(32, j.spec.not_before_ms);
    ins->bind_text_or_null(34, j.spec.messages)
        .bind_text_or_null(35, j.spec.batch)
        .bind_text_or_null(36, j.spec.custom_id)
        .bind_text_or_null(37, j.spec.source_path);
    if (j.spec.source_line > 0) {
      ins->bind(38, int64_t{j.spec.source_line});
    } else {
      ins->bind_null(38);
    }
    if (j.progress.updated_ms != 0) {
      ins->bind(39, int64_t{j.progress.prompt_tokens})
          .bind(40, int64_t{j.progress.prefilled})
          .bind(41, int64_t{j.progress.generated})
          .bind(42, j.progress.tok_s);
    } else {
      ins->bind_null(39).bind_null(40).bind_null(41).bind_null(42);
    }
    bind_time(43, j.progress.updated_ms);
    ins->run();
    const int64_t id = db_.last_insert_rowid();
    if (j.result) write_result(id, *j.result);
    for (const AttemptRecord& a : c.history) {
      auto put = db_.cached(R"(
        INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, resumed_tokens, ended_ms, ended_at,
                              outcome, error_kind, error)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11))");
      put->bind(1, id)
          .bind(2, int64_t{a.attempt})
          .bind(3, a.worker)
          .bind(4, a.started_ms)
          .bind(5, iso8601_utc(a.started_ms))
          .bind(6, int64_t{a.resumed_tokens});
      if (a.ended_ms != 0) {
        put->bind(7, a.ended_ms).bind(8, iso8601_utc(a.ended_ms));
      } else {
        put->bind_null(7).bind_null(8);
      }
      put->bind_text_or_null(9, a.outcome).bind_text_or_null(10, a.error_kind).bind_text_or_null(11, a.error);
      put->run();
    }
    if (c.checkpoint) {
      auto put = db_.cached(R"(
        INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms, saved_at)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6))");
      put->bind(1, id)
          .bind(2, int64_t{c.checkpoint->attempt})
          .bind(3, static_cast<int64_t>(c.checkpoint->tokens.size()))
          .bind(4, ints_to_json(std::span<const int32_t>(c.checkpoint->tokens)))
          .bind(5, c.checkpoint->saved_ms)
          .bind(6, iso8601_utc(c.checkpoint->saved_ms));
      put->run();
    }
    return {id, true};
  }

  QueueCounts counts_where(const std::string& batch) {
    QueueCounts c;
    auto st = db_.cached("SELECT state, count(*) FROM jobs WHERE ?1 IS NULL OR batch = ?1 GROUP BY state");
    st->bind_text_or_null(1, batch);
    while (st->step()) {
      const std::string state = st->text(0);
      const int64_t n = st->int64(1);
      switch (state_from_column(state, 0, db_.path())) {
        case JobState::queued: c.queued = n; break;
        case JobState::running: c.running = n; break;
        case JobState::done: c.done = n; break;
        case JobState::failed: c.failed = n; break;
        case JobState::cancelled: c.cancelled = n; break;
        case JobState::dead: c.dead = n; break;
      }
    }
    auto waiting = db_.cached(
        "SELECT count(*) FROM jobs WHERE state = 'queued' AND not_before_ms > ?1 AND error_kind IS NOT NULL "
        "AND (?2 IS NULL OR batch = ?2)");
    waiting->bind(1, now_epoch_ms()).bind_text_or_null(2, batch);
    if (waiting->step()) c.retry_waiting = waiting->int64(0);
    return c;
  }

  // Inside a write transaction: claims queued job `id` (as claim() describes).
  std::optional<Job> claim_id(int64_t id, const std::string& worker, int64_t lease_ms, int64_t now) {
    const int64_t expires = now + lease_ms;
    auto up = db_.cached(R"(
      UPDATE jobs SET state = 'running', worker = ?2, attempts = attempts + 1, attempt = attempt + 1,
                      started_ms = ?3, started_at = ?4, lease_expires_ms = ?5, lease_expires_at = ?6,
                      not_before_ms = NULL, not_before_at = NULL, error_kind = NULL, error = NULL,
                      progress_prompt_tokens = NULL, progress_prefilled = NULL, progress_generated = NULL,
                      progress_tok_s = NULL, progress_ms = NULL, progress_at = NULL
      WHERE id = ?1)");
    up->bind(1, id).bind(2, worker).bind(3, now).bind(4, iso8601_utc(now)).bind(5, expires).bind(6,
                                                                                                iso8601_utc(expires));
    up->run();
    auto open_attempt = db_.cached(R"(
      INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, resumed_tokens)
      SELECT id, attempt, worker, started_ms, started_at,
             ifnull((SELECT token_count FROM checkpoints WHERE job_id = ?1), 0)
      FROM jobs WHERE id = ?1)");
    open_attempt->bind(1, id).run();
    return load(id);
  }

  // Inside a write transaction.
  SubmitOutcome insert(const JobSpec& spec) {
    if (!spec.idempotency_key.empty()) {
      auto find = db_.cached("SELECT id FROM jobs WHERE idempotency_key = ?1");
      find->bind(1, spec.idempotency_key);
      if (find->step()) return {find->int64(0), false};
    }
    const int64_t now = now_epoch_ms();
    const SamplingParams& sp = spec.sampling;
    auto ins = db_.cached(R"(
      INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                        repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key,
                        created_ms, created_at, max_attempts, not_before_ms, not_before_at,
                        messages, batch, custom_id, source_path, source_line)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
              ?20, ?21, ?22, ?23, ?24))");
    ins->bind(1, spec.model)
        .bind_text_or_null(2, spec.prompt)
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
        .bind(16, iso8601_utc(now))
        .bind(17, int64_t{spec.max_attempts});
    if (spec.not_before_ms > 0) {
      ins->bind(18, spec.not_before_ms).bind(19, iso8601_utc(spec.not_before_ms));
    } else {
      ins->bind_null(18).bind_null(19);
    }
    ins->bind_text_or_null(20, spec.messages)
        .bind_text_or_null(21, spec.batch)
        .bind_text_or_null(22, spec.custom_id)
        .bind_text_or_null(23, spec.source_path);
    if (spec.source_line > 0) {
      ins->bind(24, int64_t{spec.source_line});
    } else {
      ins->bind_null(24);
    }
    ins->run();
    return {db_.last_insert_rowid(), true};
  }

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

  static Stmt& bind_fence(Stmt& st, const Lease& lease) {
    return st.bind(1, lease.job_id).bind(2, lease.worker).bind(3, int64_t{lease.attempt});
  }

  // Inside a write transaction: the job if `lease` still holds it.
  std::optional<Orphan> running_under(const Lease& lease) {
    auto st = db_.cached(std::string("SELECT attempts, max_attempts, cancel_requested FROM jobs") + kFence);
    bind_fence(*st, lease);
    if (!st->step()) return std::nullopt;
    Orphan o;
    o.id = lease.job_id;
    o.attempt = lease.attempt;
    o.attempts = static_cast<int32_t>(st->int64(0));
    o.max_attempts = static_cast<int32_t>(st->int64(1));
    o.cancel_requested = st->int64(2) != 0;
    o.worker = lease.worker;
    return o;
  }

  bool extend_lease(const Lease& lease, int64_t lease_ms) {
    const int64_t expires = now_epoch_ms() + lease_ms;
    auto up = db_.cached(std::string("UPDATE jobs SET lease_expires_ms = ?4, lease_expires_at = ?5") + kFence);
    bind_fence(*up, lease).bind(4, expires).bind(5, iso8601_utc(expires));
    up->run();
    return db_.changes() == 1;
  }

  // The fenced move of a running job to a final state; false if the fence is broken.
  bool end_running(const Lease& lease, const char* state, const std::string* error_kind, const std::string* error) {
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(std::string(R"(
      UPDATE jobs SET state = ?4, finished_ms = ?5, finished_at = ?6, error_kind = ?7, error = ?8,
                      lease_expires_ms = NULL, lease_expires_at = NULL)") +
                         kFence);
    bind_fence(*up, lease).bind(4, state).bind(5, now).bind(6, iso8601_utc(now));
    if (error_kind != nullptr) {
      up->bind(7, *error_kind).bind(8, *error);
    } else {
      up->bind_null(7).bind_null(8);
    }
    up->run();
    if (db_.changes() != 1) return false;
    drop_checkpoint(lease.job_id);
    return true;
  }

  void set_final_state(int64_t id, const char* state, const std::string* error_kind, const std::string* error) {
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(R"(
      UPDATE jobs SET state = ?2, finished_ms = ?3, finished_at = ?4, error_kind = ?5, error = ?6,
                      lease_expires_ms = NULL, lease_expires_at = NULL
      WHERE id = ?1)");
    up->bind(1, id).bind(2, state).bind(3, now).bind(4, iso8601_utc(now));
    if (error_kind != nullptr) {
      up->bind(5, *error_kind).bind(6, *error);
    } else {
      up->bind_null(5).bind_null(6);
    }
    up->run();
    drop_checkpoint(id);
  }

  void drop_checkpoint(int64_t id) { db_.cached("DELETE FROM checkpoints WHERE job_id = ?1")->bind(1, id).run(); }

  void end_attempt(const Lease& lease, const AttemptEnd& end) {
    const int64_t now = now_epoch_ms();
    auto up = db_.cached(R"(
      UPDATE attempts SET ended_ms = ?3, ended_at = ?4, outcome = ?5, error_kind = ?6, error = ?7
      WHERE job_id = ?1 AND attempt = ?2)");
    up->bind(1, lease.job_id).bind(2, int64_t{lease.attempt}).bind(3, now).bind(4, iso8601_utc(now)).bind(5,
                                                                                                         end.outcome);
    if (end.error_kind != nullptr) {
      up->bind(6, *end.error_kind).bind(7, *end.error);
    } else {
      up->bind_null(6).bind_null(7);
    }
    up->run();
  }

  // Inside a write transaction, for a running job whose attempt has ended
  // without a result: queued after a backoff while attempts are left, else dead.
  JobState requeue_or_bury(const Orphan& job, const std::string& error_kind, const std::string& error,
                           const Backoff& backoff) {
    const Lease lease{job.id, job.worker, job.attempt};
    if (job.cancel_requested) {  // a cancel requested while it ran wins over a retry
      end_running(lease, "cancelled", nullptr, nullptr);
      return JobState::cancelled;
    }
    if (job.attempts >= job.max_attempts) {
      const std::string why = error + " (attempt " + std::to_string(job.attempts) + " of " +
                              std::to_string(job.max_attempts) + "; no attempts left: `nightshift retry " +
                              std::to_string(job.id) + "` queues it again)";
      end_running(lease, "dead", &error_kind, &why);
      return JobState::dead;
    }
    const int64_t not_before = now_epoch_ms() + backoff_delay_ms(backoff, job.attempts);
    auto up = db_.cached(std::string(R"(
      UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL,
                      lease_expires_ms = NULL, lease_expires_at = NULL,
                      not_before_ms = ?4, not_before_at = ?5, error_kind = ?6, error = ?7)") +
                         kFence);
    bind_fence(*up, lease).bind(4, not_before).bind(5, iso8601_utc(not_before)).bind(6, error_kind).bind(7, error);
    up->run();
    return JobState::queued;
  }

  // Running jobs matching `where` (which may use ?1 = now, ?2 = worker).
  std::vector<Orphan> orphans(const std::string& where, int64_t now, const std::string& worker) {
    auto st = db_.cached(
        "SELECT id, attempt, attempts, max_attempts, cancel_requested, worker, ifnull(lease_expires_ms, 0) "
        "FROM jobs WHERE state = 'running' AND " +
        where + " ORDER BY id");
    if (where.find("?1") != std::string::npos) st->bind(1, now);
    if (where.find("?2") != std::string::npos) st->bind(2, worker);
    std::vector<Orphan> out;
    while (st->step()) {
      Orphan o;
      o.id = st->int64(0);
      o.attempt = static_cast<int32_t>(st->int64(1));
      o.attempts = static_cast<int32_t>(st->int64(2));
      o.max_attempts = static_cast<int32_t>(st->int64(3));
      o.cancel_requested = st->int64(4) != 0;
      o.worker = st->text(5);
      o.lease_expires_ms = st->int64(6);
      out.push_back(std::move(o));
    }
    return out;
  }

  Recovery recover(const std::vector<Orphan>& jobs, const char* outcome, const Backoff& backoff) {
    Recovery r;
    const std::string kind = outcome;
    for (const Orphan& o : jobs) {
      const std::string n = std::to_string(o.attempt);
      const std::string error =
          kind == "abandoned"
              ? "worker " + o.worker + " was restarted while it ran attempt " + n
              : "worker " + o.worker + " stopped renewing its lease during attempt " + n +
                    " (crashed, killed or hung); " +
                    (o.lease_expires_ms > 0 ? "the lease expired at " + iso8601_utc(o.lease_expires_ms)
                                            : std::string("it was claimed before the upgrade to leases"));
      end_attempt({o.id, o.worker, o.attempt}, {outcome, &kind, &error});
      switch (requeue_or_bury(o, kind, error, backoff)) {
        case JobState::cancelled: ++r.cancelled; break;
        case JobState::dead: ++r.dead; break;
        default: ++r.requeued; break;
      }
    }
    return r;
  }

  void write_result(int64_t id, const JobResult& r) {
    auto ins = db_.cached(R"(
      INSERT OR REPLACE INTO results (job_id, text, finish_reason, prompt_tokens, completion_tokens,
                                      queue_wait_ms, load_ms, prefill_ms, decode_ms, prefill_tok_s,
                                      decode_tok_s, peak_rss_bytes, bytes_read, read_gib_s, io_wait_ms,
                                      compute_ms, cache_hit_rate, prefetch_accuracy, avg_batch_size)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19))");
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
        .bind(13, static_cast<int64_t>(r.bytes_read))
        .bind(14, r.read_gib_s)
        .bind(15, r.io_wait_ms)
        .bind(16, r.compute_ms)
        .bind(17, r.cache_hit_rate)
        .bind(18, r.prefetch_accuracy)
        .bind(19, r.avg_batch_size);
    ins->run();
  }

  Db db_;
};

}  // namespace

std::unique_ptr<Queue> open_sqlite_queue(const std::string& path, const SqliteOptions& options) {
  return std::make_unique<SqliteQueue>(path, options);
}

}  // namespace ns::jobs
