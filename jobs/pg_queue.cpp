// The PostgreSQL backend of ns::jobs::Queue (contract in jobs/queue.h, tables
// in schema/postgres/), for a fleet of daemons on several machines sharing
// one queue: opening it, the reads and the fleet. The class is in
// jobs/pg_queue_impl.h; the state machine's primitives (jobs/queue_transitions.h,
// shared with SQLite) are in pg_transitions.cpp, migrate-queue in
// pg_copy.cpp. What differs from SQLite is how concurrency is handled:
// - claims select with FOR UPDATE SKIP LOCKED and update in the same
//   transaction, so concurrent claimers never wait on nor take one another's
//   jobs (a row another claimer has locked is skipped, a row it has already
//   claimed no longer matches `state = 'queued'` when re-checked);
// - every other decision that reads a row before writing it locks the row
//   first (SELECT ... FOR UPDATE), and worker writes are fenced by
//   `WHERE state = 'running' AND worker = $2 AND attempt = $3`;
// - every time comes from the server's clock (nightshift_now_ms(): the
//   transaction's start), so leases mean the same on every machine.
#include <map>

#include "jobs/pg_migrations.h"
#include "jobs/pg_queue_impl.h"

namespace ns::jobs {
namespace pg {

PgQueue::PgQueue(const std::string& url, const PgOptions& options) : db_(url, options) { migrate(db_); }

std::optional<Checkpoint> PgQueue::checkpoint(int64_t id) {
  Result r = db_.exec("SELECT attempt, tokens, saved_ms, choices, logprobs FROM checkpoints WHERE job_id = $1",
                      Params().add(id));
  if (r.rows() == 0) return std::nullopt;
  return read_checkpoint(r, 0, 0, id, db_.name());
}

bool PgQueue::cancel_requested(int64_t id) {
  Result r = db_.exec("SELECT cancel_requested FROM jobs WHERE id = $1", Params().add(id));
  return r.rows() == 1 && r.boolean(0, 0);
}

std::optional<Job> PgQueue::get(int64_t id) {
  std::vector<Job> jobs = select_jobs(" WHERE j.id = $1", Params().add(id));
  if (jobs.empty()) return std::nullopt;
  return std::move(jobs.front());
}

std::vector<Job> PgQueue::list(const ListFilter& filter) {
  std::string where =
      " WHERE ($1::text IS NULL OR j.state = $1) AND ($3::text IS NULL OR j.batch = $3)"
      " AND ($4::text IS NULL OR j.model = $4)";
  where += list_order_sql(filter.order);
  where += " LIMIT $2::bigint";  // NULL = no limit
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
  p.add_text_or_null(filter.model);
  return select_jobs(where, p);
}

std::vector<AttemptRecord> PgQueue::attempts(int64_t id) {
  Result r = db_.exec(R"(
    SELECT job_id, attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
    FROM attempts WHERE job_id = $1 ORDER BY attempt)",
                      Params().add(id));
  std::vector<AttemptRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_attempt_row(r, i));
  return out;
}

std::vector<BatchSummary> PgQueue::batches(int32_t limit) {
  Params p;
  if (limit > 0) {
    p.add(int64_t{limit});
  } else {
    p.add_null();
  }
  p.add(std::string(kHeldErrorKind));
  Result r = db_.exec(R"(
    SELECT batch, min(created_ms), max(finished_ms),
           count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
           count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'cancelled'), count(*) FILTER (WHERE state = 'dead'),
           count(*) FILTER (WHERE state = 'queued' AND not_before_ms > nightshift_now_ms()
                            AND error_kind IS NOT NULL),
           count(*) FILTER (WHERE state = 'queued' AND error_kind = $2),
           coalesce(max(error) FILTER (WHERE state = 'queued' AND error_kind = $2), ''),
           -- What the batch's ETA reads (jobs/batch_eta.h; the batch_summary view sums the same).
           coalesce(min(started_ms), 0),
           coalesce(sum(r.completion_tokens) FILTER (WHERE state = 'done'), 0)::bigint,
           coalesce(sum(r.completion_tokens), 0)::bigint,
           coalesce(sum(progress_generated) FILTER (WHERE state = 'running'), 0)::bigint,
           coalesce(sum(max_tokens * n) FILTER (WHERE state = 'running'), 0)::bigint,
           count(*) FILTER (WHERE state = 'queued' AND error_kind IS DISTINCT FROM $2),
           coalesce(sum(max_tokens * n) FILTER (WHERE state = 'queued' AND error_kind IS DISTINCT FROM $2), 0)::bigint,
           coalesce(sum(r.load_ms), 0)::double precision
    FROM jobs LEFT JOIN results AS r ON r.job_id = jobs.id WHERE batch IS NOT NULL
    GROUP BY batch ORDER BY min(created_ms) DESC, batch LIMIT $1::bigint)",
                      p);
  std::vector<BatchSummary> out;
  for (int i = 0; i < r.rows(); ++i) {
    BatchSummary b;
    b.name = r.text(i, 0);
    b.created_ms = r.int64(i, 1);
    QueueCounts& c = b.counts;
    for (int s = 0; s < 6; ++s) add_count(c, kAllJobStates[s], r.int64(i, 3 + s));
    c.retry_waiting = r.int64(i, 9);
    c.held = r.int64(i, 10);
    c.held_reason = r.text(i, 11);
    b.finished_ms = c.queued + c.running == 0 ? r.int64(i, 2) : 0;
    BatchProgress& g = b.progress;
    g.first_started_ms = r.int64(i, 12);
    g.done = c.done;
    g.done_tokens = r.int64(i, 13);
    g.result_tokens = r.int64(i, 14);
    g.running = c.running;
    g.running_generated = r.int64(i, 15);
    g.running_max_tokens = r.int64(i, 16);
    g.queued = r.int64(i, 17);
    g.queued_max_tokens = r.int64(i, 18);
    g.load_ms = r.real(i, 19);
    out.push_back(std::move(b));
  }
  return out;
}

// The sums ModelTotals describes (numeric sums cast back to the columns' types).
const char* const kResultSums =
    "count(*), sum(r.prompt_tokens)::bigint, sum(r.completion_tokens)::bigint, sum(r.bytes_read)::bigint, "
    "sum(r.queue_wait_ms), sum(r.decode_share_ms), sum(r.io_wait_ms), sum(r.compute_ms), "
    "sum(r.cache_hit_rate * r.completion_tokens), sum(r.avg_batch_size * r.completion_tokens)";

std::vector<ModelTotals> PgQueue::model_totals() {
  std::map<std::string, ModelTotals> by_model;
  Result states = db_.exec("SELECT model, state, count(*) FROM jobs GROUP BY model, state", Params());
  for (int i = 0; i < states.rows(); ++i) {
    add_count(by_model[states.text(i, 0)].jobs, state_from_column(states.text(i, 1), 0, db_.name()),
              states.int64(i, 2));
  }
  Result sums = db_.exec(
      std::string("SELECT j.model, ") + kResultSums + " FROM results r JOIN jobs j ON j.id = r.job_id GROUP BY j.model",
      Params());
  for (int i = 0; i < sums.rows(); ++i) {
    ModelTotals& m = by_model[sums.text(i, 0)];
    m.results = sums.int64(i, 1);
    m.prompt_tokens = sums.int64(i, 2);
    m.completion_tokens = sums.int64(i, 3);
    m.bytes_read = static_cast<uint64_t>(sums.int64(i, 4));
    m.queue_wait_ms = sums.real(i, 5);
    m.decode_share_ms = sums.real(i, 6);
    m.io_wait_ms = sums.real(i, 7);
    m.compute_ms = sums.real(i, 8);
    m.cache_hit_rate_x_tokens = sums.real(i, 9);
    m.batch_size_x_tokens = sums.real(i, 10);
  }
  std::vector<ModelTotals> out;
  for (auto& [name, m] : by_model) {
    m.model = name;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<TokenBucket> PgQueue::token_history(int64_t since_ms, int64_t bucket_ms) {
  if (bucket_ms <= 0) throw Error(ErrorKind::invalid_input, "token_history: bucket_ms must be > 0");
  Result r = db_.exec(R"(
    SELECT (j.finished_ms / $2::bigint) * $2::bigint AS start, count(*), sum(r.completion_tokens)::bigint,
           sum(r.decode_share_ms)
    FROM results r JOIN jobs j ON j.id = r.job_id
    WHERE j.finished_ms >= $1::bigint GROUP BY start ORDER BY start)",
                      Params().add(since_ms).add(bucket_ms));
  std::vector<TokenBucket> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back({r.int64(i, 0), r.int64(i, 1), r.int64(i, 2), r.real(i, 3)});
  return out;
}

int64_t PgQueue::prune(int64_t older_than_ms, const std::vector<JobState>& states, bool dry_run) {
  const std::string list = final_states_csv(states);
  if (list.empty()) return 0;
  if (dry_run) {
    Result r = db_.exec(
        "SELECT count(*) FROM jobs WHERE finished_ms < nightshift_now_ms() - $1 "
        "AND state = ANY (string_to_array($2, ','))",
        Params().add(older_than_ms).add(list));
    return r.int64(0, 0);
  }
  Transaction tx(db_);
  // attempts, checkpoints and results go with their job (ON DELETE CASCADE).
  Result r = db_.exec(R"(
    WITH gone AS (
      DELETE FROM jobs WHERE finished_ms < nightshift_now_ms() - $1 AND state = ANY (string_to_array($2, ','))
      RETURNING 1)
    SELECT count(*) FROM gone)",
                      Params().add(older_than_ms).add(list));
  const int64_t n = r.int64(0, 0);
  tx.commit();
  return n;
}

std::string PgQueue::register_worker(const WorkerInfo& info, const WorkerObjection& objection) {
  Transaction tx(db_);
  if (objection) {
    // A row that does not exist yet cannot be locked: one advisory lock per id
    // serializes the daemons that start under it until this commits.
    db_.exec("SELECT pg_advisory_xact_lock(hashtext('nightshift.workers'), hashtext($1))", Params().add(info.id));
    std::string refusal = objection(workers());
    if (!refusal.empty()) return refusal;
  }
  db_.exec(R"(
    INSERT INTO workers (id, host, pid, model, version, started_ms, heartbeat_ms, stopped_ms, jobs)
    VALUES ($1, $2, $3, $4, $5, nightshift_now_ms(), nightshift_now_ms(), NULL, $6::bigint[])
    ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, model = EXCLUDED.model,
      version = EXCLUDED.version, started_ms = EXCLUDED.started_ms, heartbeat_ms = EXCLUDED.heartbeat_ms,
      stopped_ms = NULL, jobs = EXCLUDED.jobs, problem = '')",
           Params()
               .add(info.id)
               .add(info.host)
               .add(info.pid)
               .add(info.model)
               .add(info.version)
               .add_array(std::span<const int64_t>(info.jobs)));
  tx.commit();
  return "";
}

void PgQueue::worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs,
                               const std::string& problem) {
  Transaction tx(db_);
  db_.exec(R"(
    UPDATE workers SET heartbeat_ms = nightshift_now_ms(), model = $2, jobs = $3::bigint[], stopped_ms = NULL,
      problem = $4
    WHERE id = $1)",
           Params().add(id).add(model).add_array(jobs).add(problem));
  tx.commit();
}

void PgQueue::worker_stopped(const std::string& id) {
  Transaction tx(db_);
  db_.exec("UPDATE workers SET stopped_ms = nightshift_now_ms(), jobs = '{}' WHERE id = $1", Params().add(id));
  tx.commit();
}

std::vector<WorkerInfo> PgQueue::workers() {
  Result r = db_.exec(kSelectWorkers);
  std::vector<WorkerInfo> out;
  for (int i = 0; i < r.rows(); ++i) {
    WorkerInfo w = read_worker(ResultRow(r, i));
    w.jobs = r.int_array(i, 8);
    out.push_back(std::move(w));
  }
  return out;
}

// The jobs kSelectJob finds with `where` (and its order).
std::vector<Job> PgQueue::select_jobs(const std::string& where, const Params& p) {
  Result r = db_.exec(std::string(kSelectJob) + where, p);
  std::vector<Job> jobs;
  jobs.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) jobs.push_back(read_job(ResultRow(r, i), db_.name()));
  return jobs;
}

}  // namespace pg

std::unique_ptr<Queue> open_pg_queue(const std::string& url, const PgOptions& options) {
  return std::make_unique<pg::PgQueue>(url, options);
}

}  // namespace ns::jobs
