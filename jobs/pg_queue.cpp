// The PostgreSQL backend of ns::jobs::Queue (contract in jobs/queue.h, tables
// in schema/postgres/), for a fleet of daemons on several machines sharing
// one queue. The semantics are those of the SQLite backend
// (jobs/sqlite_queue.cpp); what differs is how concurrency is handled:
// - claims select with FOR UPDATE SKIP LOCKED and update in the same
//   transaction, so concurrent claimers never wait on nor take one another's
//   jobs (a row another claimer has locked is skipped, a row it has already
//   claimed no longer matches `state = 'queued'` when re-checked);
// - every other decision that reads a row before writing it locks the row
//   first (SELECT ... FOR UPDATE), and worker writes are fenced by
//   `WHERE state = 'running' AND worker = $2 AND attempt = $3`;
// - every time comes from the server's clock (nightshift_now_ms(): the
//   transaction's start), so leases mean the same on every machine.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <map>
#include <string>

#include "engine/util/error.h"
#include "jobs/pg_conn.h"
#include "jobs/pg_migrations.h"
#include "jobs/pg_queue.h"
#include "jobs/queue.h"
#include "jobs/time_format.h"

namespace ns::jobs {
namespace {

using pg::Conn;
using pg::Params;
using pg::Result;
using pg::Transaction;

// Column order shared by every job SELECT and read_job() (the same order as
// the SQLite backend's).
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

// The fence of every worker write: $1 job id, $2 worker, $3 attempt.
constexpr const char* kFence = " WHERE id = $1 AND state = 'running' AND worker = $2 AND attempt = $3";

// Clears what a claim clears (the last attempt's error and progress).
constexpr const char* kClaimSet = R"(
  state = 'running', worker = $1, attempts = attempts + 1, attempt = attempt + 1,
  started_ms = nightshift_now_ms(), lease_expires_ms = nightshift_now_ms() + $2,
  not_before_ms = NULL, error_kind = NULL, error = NULL,
  progress_prompt_tokens = NULL, progress_prefilled = NULL, progress_generated = NULL,
  progress_tok_s = NULL, progress_ms = NULL)";

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

Job read_job(const Result& r, int row, const std::string& db) {
  auto i32 = [&](int col) { return static_cast<int32_t>(r.int64(row, col)); };
  Job job;
  job.id = r.int64(row, 0);
  job.spec.model = r.text(row, 1);
  job.spec.prompt = r.text(row, 2);
  SamplingParams& sp = job.spec.sampling;
  sp.max_tokens = i32(3);
  sp.temperature = static_cast<float>(r.real(row, 4));
  sp.top_k = i32(5);
  sp.top_p = static_cast<float>(r.real(row, 6));
  sp.min_p = static_cast<float>(r.real(row, 7));
  sp.repeat_penalty = static_cast<float>(r.real(row, 8));
  sp.repeat_last_n = i32(9);
  sp.seed = std::bit_cast<uint64_t>(r.int64(row, 10));
  sp.stop = stop_from_json(r.text(row, 11), job.id, db);
  sp.ignore_eos = r.boolean(row, 12);
  job.spec.priority = i32(13);
  job.spec.idempotency_key = r.text(row, 14);
  job.state = state_from_column(r.text(row, 15), job.id, db);
  job.created_ms = r.int64(row, 16);
  job.started_ms = r.int64(row, 17);  // NULL reads as 0 = "not yet"
  job.finished_ms = r.int64(row, 18);
  job.worker = r.text(row, 19);
  job.attempts = i32(20);
  job.cancel_requested = r.boolean(row, 21);
  job.error_kind = r.text(row, 22);
  job.error = r.text(row, 23);
  if (!r.is_null(row, 24)) {
    JobResult res;
    res.text = r.text(row, 25);
    res.finish_reason = r.text(row, 26);
    res.prompt_tokens = i32(27);
    res.completion_tokens = i32(28);
    res.queue_wait_ms = r.real(row, 29);
    res.load_ms = r.real(row, 30);
    res.prefill_ms = r.real(row, 31);
    res.decode_ms = r.real(row, 32);
    res.prefill_tok_s = r.real(row, 33);
    res.decode_tok_s = r.real(row, 34);
    res.peak_rss_bytes = static_cast<uint64_t>(r.int64(row, 35));
    res.bytes_read = static_cast<uint64_t>(r.int64(row, 36));
    res.read_gib_s = r.real(row, 51);
    res.io_wait_ms = r.real(row, 52);
    res.compute_ms = r.real(row, 53);
    res.cache_hit_rate = r.real(row, 54);
    res.prefetch_accuracy = r.real(row, 55);
    res.avg_batch_size = r.real(row, 56);
    job.result = std::move(res);
  }
  job.attempt = i32(37);
  job.lease_expires_ms = r.int64(row, 38);
  job.spec.max_attempts = i32(39);
  job.spec.not_before_ms = r.int64(row, 40);
  job.spec.messages = r.text(row, 41);
  job.spec.batch = r.text(row, 42);
  job.spec.custom_id = r.text(row, 43);
  job.spec.source_path = r.text(row, 44);
  job.spec.source_line = i32(45);
  job.progress.prompt_tokens = i32(46);
  job.progress.prefilled = i32(47);
  job.progress.generated = i32(48);
  job.progress.tok_s = r.real(row, 49);
  job.progress.updated_ms = r.int64(row, 50);
  return job;
}

void validate_spec(const JobSpec& spec, const std::string& which = "") {
  if (std::string problem = spec_problem(spec); !problem.empty()) {
    throw Error(ErrorKind::invalid_input, which + problem);
  }
  // Valid UTF-8 may hold U+0000, which PostgreSQL text cannot.
  const std::string& input = spec.is_chat() ? spec.messages : spec.prompt;
  if (const size_t at = input.find('\0'); at != std::string::npos) {
    throw Error(ErrorKind::invalid_input, which + (spec.is_chat() ? "the chat messages hold" : "the prompt holds") +
                                              " a NUL byte (at byte " + std::to_string(at) +
                                              "), which a PostgreSQL queue cannot store; remove it");
  }
}

// How an attempt ended, for the attempts table.
struct AttemptEnd {
  const char* outcome;
  const std::string* error_kind = nullptr;
  const std::string* error = nullptr;
};

// A running job whose attempt is ending without a result, as recovery sees it.
struct Orphan {
  int64_t id = 0;
  int32_t attempt = 0, attempts = 0, max_attempts = 1;
  bool cancel_requested = false;
  std::string worker;
  int64_t lease_expires_ms = 0;
};

Params fence(const Lease& lease) { return Params().add(lease.job_id).add(lease.worker).add(lease.attempt); }

class PgQueue final : public Queue {
 public:
  explicit PgQueue(const std::string& url) : db_(url) { pg::migrate(db_); }

  // ---- submitting -------------------------------------------------------------

  SubmitOutcome submit(const JobSpec& spec) override {
    validate_spec(spec);
    Transaction tx(db_);
    const SubmitOutcome out = insert(spec);
    tx.commit();
    return out;
  }

  std::vector<SubmitOutcome> submit_many(std::span<const JobSpec> specs) override {
    for (size_t i = 0; i < specs.size(); ++i) validate_spec(specs[i], "job " + std::to_string(i + 1) + ": ");
    std::vector<SubmitOutcome> out;
    out.reserve(specs.size());
    Transaction tx(db_);
    for (const JobSpec& spec : specs) out.push_back(insert(spec));
    tx.commit();
    return out;
  }

  // ---- the worker's side ------------------------------------------------------

  std::optional<Job> claim(const std::string& worker, int64_t lease_ms) override {
    // Idle daemons poll: one cheap read outside a transaction first.
    if (!anything_claimable()) return std::nullopt;
    Transaction tx(db_);
    Result picked = db_.exec(std::string(R"(
      WITH picked AS (
        SELECT id FROM jobs
        WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= nightshift_now_ms())
        ORDER BY priority DESC, id LIMIT 1
        FOR UPDATE SKIP LOCKED)
      UPDATE jobs SET )") + kClaimSet + R"(
      FROM picked WHERE jobs.id = picked.id RETURNING jobs.id)",
                             Params().add(worker).add(lease_ms));
    if (picked.rows() == 0) return std::nullopt;  // taken by others meanwhile
    const std::vector<int64_t> ids{picked.int64(0, 0)};
    std::vector<Job> jobs = open_attempts(ids);
    tx.commit();
    return std::move(jobs.front());
  }

  using Queue::claim_batch;
  std::vector<Job> claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs, const std::string& model,
                               const std::vector<std::string>& servable) override {
    std::vector<Job> out;
    if (max_jobs <= 0 || !anything_claimable()) return out;
    Transaction tx(db_);
    // The head of the queue as this claimer can take it (rows other claimers
    // hold are skipped: they are being taken, so they are no longer ahead;
    // jobs for models it cannot serve are left to the daemons that can).
    Result head = db_.exec(R"(
      SELECT id, model FROM jobs
      WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= nightshift_now_ms())
        AND ($2::jsonb IS NULL OR model IN (SELECT jsonb_array_elements_text($2::jsonb)))
      ORDER BY priority DESC, id LIMIT $1
      FOR UPDATE SKIP LOCKED)",
                           Params().add(int64_t{max_jobs}).add_text_or_null(
                               servable.empty() ? std::string() : nlohmann::json(servable).dump()));
    std::vector<int64_t> ids;
    std::string want = model;
    for (int i = 0; i < head.rows(); ++i) {
      const std::string m = head.text(i, 1);
      if (want.empty()) want = m;
      if (m != want) break;  // never jump a job ahead in the queue
      ids.push_back(head.int64(i, 0));
    }
    if (ids.empty()) return out;
    Params p = Params().add(worker).add(lease_ms);
    db_.exec(std::string("UPDATE jobs SET ") + kClaimSet + " WHERE id = ANY($3::bigint[])",
             p.add_array(std::span<const int64_t>(ids)));
    out = open_attempts(ids);
    tx.commit();
    return out;
  }

  using Queue::heartbeat;
  bool heartbeat(const Lease& lease, int64_t lease_ms, const std::optional<JobProgress>& progress) override {
    Transaction tx(db_);
    Params p = fence(lease).add(lease_ms);
    std::string sql = "UPDATE jobs SET lease_expires_ms = nightshift_now_ms() + $4";
    if (progress) {
      sql += R"(, progress_prompt_tokens = $5, progress_prefilled = $6, progress_generated = $7,
                  progress_tok_s = $8, progress_ms = nightshift_now_ms())";
      p.add(progress->prompt_tokens).add(progress->prefilled).add(progress->generated).add(progress->tok_s);
    }
    if (db_.exec(sql + kFence, p).affected() != 1) return false;
    tx.commit();
    return true;
  }

  bool save_checkpoint(const Lease& lease, std::span<const int32_t> tokens, int64_t lease_ms) override {
    Transaction tx(db_);
    if (!extend_lease(lease, lease_ms)) return false;
    db_.exec(R"(
      INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms)
      VALUES ($1, $2, $3, $4::integer[], nightshift_now_ms())
      ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, token_count = EXCLUDED.token_count,
                                         tokens = EXCLUDED.tokens, saved_ms = EXCLUDED.saved_ms)",
             Params().add(lease.job_id).add(lease.attempt).add(static_cast<int64_t>(tokens.size())).add_array(tokens));
    tx.commit();
    return true;
  }

  std::optional<Checkpoint> checkpoint(int64_t id) override {
    Result r = db_.exec("SELECT attempt, tokens, saved_ms FROM checkpoints WHERE job_id = $1", Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    return read_checkpoint(r, 0, 0);
  }

  bool complete(const Lease& lease, const JobResult& result) override {
    Transaction tx(db_);
    if (!end_running(lease, "done", nullptr, nullptr)) return false;
    write_result(lease.job_id, result);
    end_attempt(lease, {"done"});
    tx.commit();
    return true;
  }

  bool fail(const Lease& lease, const std::string& error_kind, const std::string& message) override {
    Transaction tx(db_);
    if (!end_running(lease, "failed", &error_kind, &message)) return false;
    end_attempt(lease, {"failed", &error_kind, &message});
    tx.commit();
    return true;
  }

  std::optional<JobState> fail_transient(const Lease& lease, const std::string& error_kind,
                                         const std::string& message, const Backoff& backoff) override {
    Transaction tx(db_);
    std::optional<Orphan> job = running_under(lease);
    if (!job) return std::nullopt;
    end_attempt(lease, {"transient_error", &error_kind, &message});
    const JobState state = requeue_or_bury(*job, error_kind, message, backoff);
    tx.commit();
    return state;
  }

  bool finish_cancelled(const Lease& lease, const JobResult& partial) override {
    Transaction tx(db_);
    if (!end_running(lease, "cancelled", nullptr, nullptr)) return false;
    write_result(lease.job_id, partial);
    end_attempt(lease, {"cancelled"});
    tx.commit();
    return true;
  }

  bool release(const Lease& lease) override {
    Transaction tx(db_);
    std::optional<Orphan> job = running_under(lease);
    if (!job) return false;
    if (job->cancel_requested) {
      end_running(lease, "cancelled", nullptr, nullptr);
      end_attempt(lease, {"cancelled"});
    } else {
      db_.exec(std::string(R"(
        UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, lease_expires_ms = NULL,
                        attempts = greatest(attempts - 1, 0))") +
                   kFence,
               fence(lease));
      end_attempt(lease, {"released"});
    }
    tx.commit();
    return true;
  }

  // ---- recovery ---------------------------------------------------------------

  Recovery recover_expired(const Backoff& backoff) override {
    // Called on every idle poll: look without a transaction first.
    if (db_.exec("SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires_ms < nightshift_now_ms() LIMIT 1")
            .rows() == 0) {
      return {};
    }
    Transaction tx(db_);
    // SKIP LOCKED: another daemon recovering the same job at the same moment
    // keeps it; this one moves on.
    const Recovery r = recover(orphans("lease_expires_ms < nightshift_now_ms()", {}), "lease_expired", backoff);
    tx.commit();
    return r;
  }

  Recovery recover_worker(const std::string& worker, const Backoff& backoff) override {
    if (db_.exec("SELECT 1 FROM jobs WHERE state = 'running' AND worker = $1 LIMIT 1", Params().add(worker))
            .rows() == 0) {
      return {};
    }
    Transaction tx(db_);
    const Recovery r = recover(orphans("worker = $1", Params().add(worker)), "abandoned", backoff);
    tx.commit();
    return r;
  }

  // ---- people's side ----------------------------------------------------------

  bool cancel(int64_t id) override {
    Transaction tx(db_);
    const std::optional<std::string> state = locked_state_of(id);
    if (state == "queued") {
      set_final_state(id, "cancelled");
    } else if (state == "running") {
      db_.exec("UPDATE jobs SET cancel_requested = true WHERE id = $1", Params().add(id));
    } else {
      return false;  // unknown or already final; nothing written
    }
    tx.commit();
    return true;
  }

  bool cancel_requested(int64_t id) override {
    Result r = db_.exec("SELECT cancel_requested FROM jobs WHERE id = $1", Params().add(id));
    return r.rows() == 1 && r.boolean(0, 0);
  }

  RetryOutcome retry(int64_t id) override {
    Transaction tx(db_);
    const std::optional<std::string> state = locked_state_of(id);
    if (!state) return RetryOutcome::not_found;
    if (*state != "failed" && *state != "dead" && *state != "cancelled") return RetryOutcome::not_retryable;
    db_.exec(R"(
      UPDATE jobs SET state = 'queued', attempts = 0, worker = NULL, started_ms = NULL, finished_ms = NULL,
                      error_kind = NULL, error = NULL, cancel_requested = false, not_before_ms = NULL,
                      lease_expires_ms = NULL
      WHERE id = $1)",
             Params().add(id));
    db_.exec("DELETE FROM results WHERE job_id = $1", Params().add(id));
    drop_checkpoint(id);
    tx.commit();
    return RetryOutcome::requeued;
  }

  std::optional<Job> get(int64_t id) override {
    Result r = db_.exec(std::string(kSelectJob) + " WHERE j.id = $1", Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    return read_job(r, 0, db_.name());
  }

  std::vector<Job> list(const ListFilter& filter) override {
    std::string sql = kSelectJob;
    sql += " WHERE ($1::text IS NULL OR j.state = $1) AND ($3::text IS NULL OR j.batch = $3)";
    switch (filter.order) {
      case ListFilter::Order::newest_first: sql += " ORDER BY j.id DESC"; break;
      case ListFilter::Order::oldest_first: sql += " ORDER BY j.id"; break;
      case ListFilter::Order::recently_finished:
        sql += " AND j.finished_ms IS NOT NULL ORDER BY j.finished_ms DESC, j.id DESC";
        break;
    }
    sql += " LIMIT $2::bigint";  // NULL = no limit
    Params p;
    if (filter.state) {
      p.add(state_name(*filter.state));
    } else {
      p.add_null();
    }
    if (filter.limit > 0) {
      p.add(int64_t{filter.limit});
    } else {
      p.add_null();
    }
    p.add_text_or_null(filter.batch);
    Result r = db_.exec(sql, p);
    std::vector<Job> jobs;
    jobs.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) jobs.push_back(read_job(r, i, db_.name()));
    return jobs;
  }

  std::vector<AttemptRecord> attempts(int64_t id) override {
    Result r = db_.exec(R"(
      SELECT job_id, attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
      FROM attempts WHERE job_id = $1 ORDER BY attempt)",
                        Params().add(id));
    std::vector<AttemptRecord> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_attempt(r, i));
    return out;
  }

  QueueCounts counts() override { return counts_where(""); }
  QueueCounts counts(const std::string& batch) override { return counts_where(batch); }

  std::vector<BatchSummary> batches(int32_t limit) override {
    Params p;
    if (limit > 0) {
      p.add(int64_t{limit});
    } else {
      p.add_null();
    }
    Result r = db_.exec(R"(
      SELECT batch, min(created_ms), max(finished_ms),
             count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
             count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'),
             count(*) FILTER (WHERE state = 'cancelled'), count(*) FILTER (WHERE state = 'dead'),
             count(*) FILTER (WHERE state = 'queued' AND not_before_ms > nightshift_now_ms()
                              AND error_kind IS NOT NULL)
      FROM jobs WHERE batch IS NOT NULL
      GROUP BY batch ORDER BY min(created_ms) DESC, batch LIMIT $1::bigint)",
                        p);
    std::vector<BatchSummary> out;
    for (int i = 0; i < r.rows(); ++i) {
      BatchSummary b;
      b.name = r.text(i, 0);
      b.created_ms = r.int64(i, 1);
      QueueCounts& c = b.counts;
      c.queued = r.int64(i, 3);
      c.running = r.int64(i, 4);
      c.done = r.int64(i, 5);
      c.failed = r.int64(i, 6);
      c.cancelled = r.int64(i, 7);
      c.dead = r.int64(i, 8);
      c.retry_waiting = r.int64(i, 9);
      b.finished_ms = c.queued + c.running == 0 ? r.int64(i, 2) : 0;
      out.push_back(std::move(b));
    }
    return out;
  }

  // ---- the fleet ----------------------------------------------------------------

  void register_worker(const WorkerInfo& info) override {
    Transaction tx(db_);
    db_.exec(R"(
      INSERT INTO workers (id, host, pid, model, version, started_ms, heartbeat_ms, stopped_ms, jobs)
      VALUES ($1, $2, $3, $4, $5, nightshift_now_ms(), nightshift_now_ms(), NULL, $6::bigint[])
      ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, model = EXCLUDED.model,
        version = EXCLUDED.version, started_ms = EXCLUDED.started_ms, heartbeat_ms = EXCLUDED.heartbeat_ms,
        stopped_ms = NULL, jobs = EXCLUDED.jobs)",
             Params()
                 .add(info.id)
                 .add(info.host)
                 .add(info.pid)
                 .add(info.model)
                 .add(info.version)
                 .add_array(std::span<const int64_t>(info.jobs)));
    tx.commit();
  }

  void worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs) override {
    Transaction tx(db_);
    db_.exec(R"(
      UPDATE workers SET heartbeat_ms = nightshift_now_ms(), model = $2, jobs = $3::bigint[], stopped_ms = NULL
      WHERE id = $1)",
             Params().add(id).add(model).add_array(jobs));
    tx.commit();
  }

  void worker_stopped(const std::string& id) override {
    Transaction tx(db_);
    db_.exec("UPDATE workers SET stopped_ms = nightshift_now_ms(), jobs = '{}' WHERE id = $1", Params().add(id));
    tx.commit();
  }

  std::vector<WorkerInfo> workers() override {
    Result r = db_.exec(R"(
      SELECT id, host, pid, model, version, started_ms, heartbeat_ms, stopped_ms, jobs FROM workers
      ORDER BY stopped_ms IS NOT NULL, heartbeat_ms DESC, id)");
    std::vector<WorkerInfo> out;
    for (int i = 0; i < r.rows(); ++i) {
      WorkerInfo w;
      w.id = r.text(i, 0);
      w.host = r.text(i, 1);
      w.pid = r.int64(i, 2);
      w.model = r.text(i, 3);
      w.version = r.text(i, 4);
      w.started_ms = r.int64(i, 5);
      w.heartbeat_ms = r.int64(i, 6);
      w.stopped_ms = r.int64(i, 7);
      w.jobs = r.int_array(i, 8);
      out.push_back(std::move(w));
    }
    return out;
  }

  // ---- copying a queue --------------------------------------------------------

  std::vector<JobCopy> export_jobs(int64_t after_id, int32_t limit) override {
    Result r = db_.exec(std::string(kSelectJob) + " WHERE j.id > $1 ORDER BY j.id LIMIT $2",
                        Params().add(after_id).add(int64_t{std::max(limit, 1)}));
    std::vector<JobCopy> out;
    std::map<int64_t, size_t> index;
    std::vector<int64_t> ids;
    for (int i = 0; i < r.rows(); ++i) {
      JobCopy c;
      c.job = read_job(r, i, db_.name());
      index[c.job.id] = out.size();
      ids.push_back(c.job.id);
      out.push_back(std::move(c));
    }
    if (ids.empty()) return out;
    Params p;
    p.add_array(std::span<const int64_t>(ids));
    Result a = db_.exec(R"(
      SELECT job_id, attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
      FROM attempts WHERE job_id = ANY($1::bigint[]) ORDER BY job_id, attempt)",
                        p);
    for (int i = 0; i < a.rows(); ++i) out[index.at(a.int64(i, 0))].history.push_back(read_attempt(a, i));
    Result c = db_.exec(
        "SELECT job_id, attempt, tokens, saved_ms FROM checkpoints WHERE job_id = ANY($1::bigint[])", p);
    for (int i = 0; i < c.rows(); ++i) out[index.at(c.int64(i, 0))].checkpoint = read_checkpoint(c, i, 1);
    return out;
  }

  std::vector<SubmitOutcome> import_jobs(std::span<const JobCopy> copies, bool keep_ids) override {
    std::vector<SubmitOutcome> out;
    out.reserve(copies.size());
    Transaction tx(db_);
    if (keep_ids && !copies.empty()) {
      std::vector<int64_t> ids;
      for (const JobCopy& c : copies) ids.push_back(c.job.id);
      Params p;
      Result taken = db_.exec("SELECT min(id) FROM jobs WHERE id = ANY($1::bigint[])",
                              p.add_array(std::span<const int64_t>(ids)));
      if (!taken.is_null(0, 0)) {
        throw DatabaseError(false, "database " + db_.name() + " already has a job " + taken.text(0, 0) +
                                       "; copy into an empty queue to keep the ids, or append under new ids");
      }
    }
    for (const JobCopy& c : copies) out.push_back(import_one(c, keep_ids));
    if (keep_ids) {
      // Later submits get ids above every copied one.
      db_.exec("SELECT setval(pg_get_serial_sequence('jobs', 'id'), greatest((SELECT max(id) FROM jobs), 1))");
    }
    tx.commit();
    return out;
  }

 private:
  bool anything_claimable() {
    return db_.exec("SELECT 1 FROM jobs WHERE state = 'queued' AND "
                    "(not_before_ms IS NULL OR not_before_ms <= nightshift_now_ms()) LIMIT 1")
               .rows() > 0;
  }

  // Inside the claim's transaction: the attempts rows of the jobs just
  // claimed, and the jobs as they are now, in claim order.
  std::vector<Job> open_attempts(const std::vector<int64_t>& ids) {
    Params p;
    p.add_array(std::span<const int64_t>(ids));
    db_.exec(R"(
      INSERT INTO attempts (job_id, attempt, worker, started_ms, resumed_tokens)
      SELECT j.id, j.attempt, j.worker, j.started_ms, coalesce(c.token_count, 0)
      FROM jobs AS j LEFT JOIN checkpoints AS c ON c.job_id = j.id
      WHERE j.id = ANY($1::bigint[]))",
             p);
    Result r = db_.exec(std::string(kSelectJob) + " WHERE j.id = ANY($1::bigint[]) ORDER BY j.priority DESC, j.id", p);
    std::vector<Job> jobs;
    for (int i = 0; i < r.rows(); ++i) jobs.push_back(read_job(r, i, db_.name()));
    return jobs;
  }

  QueueCounts counts_where(const std::string& batch) {
    Result r = db_.exec(R"(
      SELECT state, count(*),
             count(*) FILTER (WHERE not_before_ms > nightshift_now_ms() AND error_kind IS NOT NULL)
      FROM jobs WHERE $1::text IS NULL OR batch = $1 GROUP BY state)",
                        Params().add_text_or_null(batch));
    QueueCounts c;
    for (int i = 0; i < r.rows(); ++i) {
      const int64_t n = r.int64(i, 1);
      switch (state_from_column(r.text(i, 0), 0, db_.name())) {
        case JobState::queued:
          c.queued = n;
          c.retry_waiting = r.int64(i, 2);
          break;
        case JobState::running: c.running = n; break;
        case JobState::done: c.done = n; break;
        case JobState::failed: c.failed = n; break;
        case JobState::cancelled: c.cancelled = n; break;
        case JobState::dead: c.dead = n; break;
      }
    }
    return c;
  }

  static AttemptRecord read_attempt(const Result& r, int i) {
    AttemptRecord a;
    a.attempt = static_cast<int32_t>(r.int64(i, 1));
    a.worker = r.text(i, 2);
    a.started_ms = r.int64(i, 3);
    a.ended_ms = r.int64(i, 4);
    a.resumed_tokens = static_cast<int32_t>(r.int64(i, 5));
    a.outcome = r.text(i, 6);
    a.error_kind = r.text(i, 7);
    a.error = r.text(i, 8);
    return a;
  }

  // Columns attempt, tokens, saved_ms from `first`.
  static Checkpoint read_checkpoint(const Result& r, int row, int first) {
    Checkpoint c;
    c.attempt = static_cast<int32_t>(r.int64(row, first));
    for (int64_t t : r.int_array(row, first + 1)) c.tokens.push_back(static_cast<int32_t>(t));
    c.saved_ms = r.int64(row, first + 2);
    return c;
  }

  // Inside a transaction.
  SubmitOutcome insert(const JobSpec& spec) {
    const SamplingParams& sp = spec.sampling;
    Params p;
    p.add(spec.model)
        .add_text_or_null(spec.prompt)
        .add(sp.max_tokens)
        .add(double{sp.temperature})
        .add(sp.top_k)
        .add(double{sp.top_p})
        .add(double{sp.min_p})
        .add(double{sp.repeat_penalty})
        .add(sp.repeat_last_n)
        .add(std::bit_cast<int64_t>(sp.seed))
        .add(stop_to_json(sp.stop))
        .add(sp.ignore_eos)
        .add(spec.priority)
        .add_text_or_null(spec.idempotency_key)
        .add(spec.max_attempts)
        .add_or_null(spec.not_before_ms)
        .add_text_or_null(spec.messages)
        .add_text_or_null(spec.batch)
        .add_text_or_null(spec.custom_id)
        .add_text_or_null(spec.source_path)
        .add_or_null(int64_t{spec.source_line});
    // A second submit with the same key (even concurrently, from another
    // machine) inserts nothing and returns the first job's id.
    Result r = db_.exec(R"(
      INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                        repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key,
                        created_ms, max_attempts, not_before_ms, messages, batch, custom_id, source_path, source_line)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13, $14,
              nightshift_now_ms(), $15, $16, $17::json, $18, $19, $20, $21)
      ON CONFLICT (idempotency_key) DO NOTHING
      RETURNING id)",
                        p);
    if (r.rows() == 1) return {r.int64(0, 0), true};
    Result existing = db_.exec("SELECT id FROM jobs WHERE idempotency_key = $1", Params().add(spec.idempotency_key));
    if (existing.rows() != 1) {
      throw DatabaseError(true, "database " + db_.name() + ": job with idempotency key '" + spec.idempotency_key +
                                    "' was neither inserted nor found (deleted meanwhile?); submit it again");
    }
    return {existing.int64(0, 0), false};
  }

  // Inside a transaction: one exported job, as it was.
  SubmitOutcome import_one(const JobCopy& c, bool keep_ids) {
    const Job& j = c.job;
    if (!j.spec.idempotency_key.empty()) {
      Result existing =
          db_.exec("SELECT id FROM jobs WHERE idempotency_key = $1", Params().add(j.spec.idempotency_key));
      if (existing.rows() == 1) return {existing.int64(0, 0), false};
    }
    const SamplingParams& sp = j.spec.sampling;
    Params p;
    p.add(j.id)
        .add(j.spec.model)
        .add_text_or_null(j.spec.prompt)
        .add(sp.max_tokens)
        .add(double{sp.temperature})
        .add(sp.top_k)
        .add(double{sp.top_p})
        .add(double{sp.min_p})
        .add(double{sp.repeat_penalty})
        .add(sp.repeat_last_n)
        .add(std::bit_cast<int64_t>(sp.seed))
        .add(stop_to_json(sp.stop))
        .add(sp.ignore_eos)
        .add(j.spec.priority)
        .add_text_or_null(j.spec.idempotency_key)
        .add(state_name(j.state))
        .add(j.created_ms)
        .add_or_null(j.started_ms)
        .add_or_null(j.finished_ms)
        .add_text_or_null(j.worker)
        .add(j.attempts)
        .add(j.cancel_requested)
        .add_text_or_null(j.error_kind)
        .add_text_or_null(j.error)
        .add(j.spec.max_attempts)
        .add(j.attempt)
        .add_or_null(j.lease_expires_ms)
        .add_or_null(j.spec.not_before_ms)
        .add_text_or_null(j.spec.messages)
        .add_text_or_null(j.spec.batch)
        .add_text_or_null(j.spec.custom_id)
        .add_text_or_null(j.spec.source_path)
        .add_or_null(int64_t{j.spec.source_line});
    const bool has_progress = j.progress.updated_ms != 0;
    if (has_progress) {
      p.add(j.progress.prompt_tokens).add(j.progress.prefilled).add(j.progress.generated).add(j.progress.tok_s);
      p.add(j.progress.updated_ms);
    } else {
      p.add_null().add_null().add_null().add_null().add_null();
    }
    // OVERRIDING USER VALUE: the id given ($1) is ignored and a new one drawn.
    Result r = db_.exec(std::string(R"(
      INSERT INTO jobs (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                        repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
                        started_ms, finished_ms, worker, attempts, cancel_requested, error_kind, error,
                        max_attempts, attempt, lease_expires_ms, not_before_ms, messages, batch, custom_id,
                        source_path, source_line, progress_prompt_tokens, progress_prefilled,
                        progress_generated, progress_tok_s, progress_ms) )") +
                            (keep_ids ? "" : "OVERRIDING USER VALUE") + R"(
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18, $19, $20,
              $21, $22, $23, $24, $25, $26, $27, $28, $29::json, $30, $31, $32, $33, $34, $35, $36, $37, $38)
      RETURNING id)",
                        p);
    const int64_t id = r.int64(0, 0);
    if (j.result) write_result(id, *j.result);
    for (const AttemptRecord& a : c.history) {
      db_.exec(R"(
        INSERT INTO attempts (job_id, attempt, worker, started_ms, resumed_tokens, ended_ms, outcome, error_kind, error)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9))",
               Params()
                   .add(id)
                   .add(a.attempt)
                   .add(a.worker)
                   .add(a.started_ms)
                   .add(a.resumed_tokens)
                   .add_or_null(a.ended_ms)
                   .add_text_or_null(a.outcome)
                   .add_text_or_null(a.error_kind)
                   .add_text_or_null(a.error));
    }
    if (c.checkpoint) {
      db_.exec(R"(
        INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms)
        VALUES ($1, $2, $3, $4::integer[], $5))",
               Params()
                   .add(id)
                   .add(c.checkpoint->attempt)
                   .add(static_cast<int64_t>(c.checkpoint->tokens.size()))
                   .add_array(std::span<const int32_t>(c.checkpoint->tokens))
                   .add(c.checkpoint->saved_ms));
    }
    return {id, true};
  }

  std::optional<std::string> locked_state_of(int64_t id) {
    Result r = db_.exec("SELECT state FROM jobs WHERE id = $1 FOR UPDATE", Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    return r.text(0, 0);
  }

  // Inside a transaction: the job (locked) if `lease` still holds it.
  std::optional<Orphan> running_under(const Lease& lease) {
    Result r = db_.exec(std::string("SELECT attempts, max_attempts, cancel_requested FROM jobs") + kFence +
                            " FOR UPDATE",
                        fence(lease));
    if (r.rows() == 0) return std::nullopt;
    Orphan o;
    o.id = lease.job_id;
    o.attempt = lease.attempt;
    o.attempts = static_cast<int32_t>(r.int64(0, 0));
    o.max_attempts = static_cast<int32_t>(r.int64(0, 1));
    o.cancel_requested = r.boolean(0, 2);
    o.worker = lease.worker;
    return o;
  }

  bool extend_lease(const Lease& lease, int64_t lease_ms) {
    return db_.exec(std::string("UPDATE jobs SET lease_expires_ms = nightshift_now_ms() + $4") + kFence,
                    fence(lease).add(lease_ms))
               .affected() == 1;
  }

  // The fenced move of a running job to a final state; false if the fence is broken.
  bool end_running(const Lease& lease, const char* state, const std::string* error_kind, const std::string* error) {
    Params p = fence(lease).add(state);
    if (error_kind != nullptr) {
      p.add(*error_kind).add(*error);
    } else {
      p.add_null().add_null();
    }
    const Result r = db_.exec(std::string(R"(
      UPDATE jobs SET state = $4, finished_ms = nightshift_now_ms(), error_kind = $5, error = $6,
                      lease_expires_ms = NULL)") +
                                  kFence,
                              p);
    if (r.affected() != 1) return false;
    drop_checkpoint(lease.job_id);
    return true;
  }

  void set_final_state(int64_t id, const char* state) {
    db_.exec(R"(
      UPDATE jobs SET state = $2, finished_ms = nightshift_now_ms(), error_kind = NULL, error = NULL,
                      lease_expires_ms = NULL
      WHERE id = $1)",
             Params().add(id).add(state));
    drop_checkpoint(id);
  }

  void drop_checkpoint(int64_t id) { db_.exec("DELETE FROM checkpoints WHERE job_id = $1", Params().add(id)); }

  void end_attempt(const Lease& lease, const AttemptEnd& end) {
    Params p = Params().add(lease.job_id).add(lease.attempt).add(end.outcome);
    if (end.error_kind != nullptr) {
      p.add(*end.error_kind).add(*end.error);
    } else {
      p.add_null().add_null();
    }
    db_.exec(R"(
      UPDATE attempts SET ended_ms = nightshift_now_ms(), outcome = $3, error_kind = $4, error = $5
      WHERE job_id = $1 AND attempt = $2)",
             p);
  }

  // Inside a transaction, for a running job (locked) whose attempt has ended
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
    const int64_t delay = backoff_delay_ms(backoff, job.attempts);
    db_.exec(std::string(R"(
      UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, lease_expires_ms = NULL,
                      not_before_ms = nightshift_now_ms() + $4, error_kind = $5, error = $6)") +
                 kFence,
             fence(lease).add(delay).add(error_kind).add(error));
    return JobState::queued;
  }

  // Running jobs matching `where` (locked; rows another transaction holds are skipped).
  std::vector<Orphan> orphans(const std::string& where, const Params& params) {
    Result r = db_.exec(
        "SELECT id, attempt, attempts, max_attempts, cancel_requested, worker, coalesce(lease_expires_ms, 0) "
        "FROM jobs WHERE state = 'running' AND " +
            where + " ORDER BY id FOR UPDATE SKIP LOCKED",
        params);
    std::vector<Orphan> out;
    for (int i = 0; i < r.rows(); ++i) {
      Orphan o;
      o.id = r.int64(i, 0);
      o.attempt = static_cast<int32_t>(r.int64(i, 1));
      o.attempts = static_cast<int32_t>(r.int64(i, 2));
      o.max_attempts = static_cast<int32_t>(r.int64(i, 3));
      o.cancel_requested = r.boolean(i, 4);
      o.worker = r.text(i, 5);
      o.lease_expires_ms = r.int64(i, 6);
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
                    " (crashed, killed or hung); the lease expired at " + iso8601_utc(o.lease_expires_ms);
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
    db_.exec(R"(
      INSERT INTO results (job_id, text, finish_reason, prompt_tokens, completion_tokens, queue_wait_ms, load_ms,
                           prefill_ms, decode_ms, prefill_tok_s, decode_tok_s, peak_rss_bytes, bytes_read,
                           read_gib_s, io_wait_ms, compute_ms, cache_hit_rate, prefetch_accuracy, avg_batch_size)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
      ON CONFLICT (job_id) DO UPDATE SET
        text = EXCLUDED.text, finish_reason = EXCLUDED.finish_reason, prompt_tokens = EXCLUDED.prompt_tokens,
        completion_tokens = EXCLUDED.completion_tokens, queue_wait_ms = EXCLUDED.queue_wait_ms,
        load_ms = EXCLUDED.load_ms, prefill_ms = EXCLUDED.prefill_ms, decode_ms = EXCLUDED.decode_ms,
        prefill_tok_s = EXCLUDED.prefill_tok_s, decode_tok_s = EXCLUDED.decode_tok_s,
        peak_rss_bytes = EXCLUDED.peak_rss_bytes, bytes_read = EXCLUDED.bytes_read,
        read_gib_s = EXCLUDED.read_gib_s, io_wait_ms = EXCLUDED.io_wait_ms, compute_ms = EXCLUDED.compute_ms,
        cache_hit_rate = EXCLUDED.cache_hit_rate, prefetch_accuracy = EXCLUDED.prefetch_accuracy,
        avg_batch_size = EXCLUDED.avg_batch_size)",
             Params()
                 .add(id)
                 .add(r.text)
                 .add(r.finish_reason)
                 .add(r.prompt_tokens)
                 .add(r.completion_tokens)
                 .add(r.queue_wait_ms)
                 .add(r.load_ms)
                 .add(r.prefill_ms)
                 .add(r.decode_ms)
                 .add(r.prefill_tok_s)
                 .add(r.decode_tok_s)
                 .add(static_cast<int64_t>(r.peak_rss_bytes))
                 .add(static_cast<int64_t>(r.bytes_read))
                 .add(r.read_gib_s)
                 .add(r.io_wait_ms)
                 .add(r.compute_ms)
                 .add(r.cache_hit_rate)
                 .add(r.prefetch_accuracy)
                 .add(r.avg_batch_size));
  }

  Conn db_;
};

}  // namespace

std::unique_ptr<Queue> open_pg_queue(const std::string& url) { return std::make_unique<PgQueue>(url); }

}  // namespace ns::jobs
