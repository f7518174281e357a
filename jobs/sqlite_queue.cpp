// The SQLite backend of ns::jobs::Queue (contract in jobs/queue.h, tables in
// schema/sqlite/): opening it, the reads and the fleet. The class is in
// jobs/sqlite_queue_impl.h; the state machine's primitives are in
// sqlite_transitions.cpp, migrate-queue in sqlite_copy.cpp. Every write is
// one BEGIN IMMEDIATE transaction; reads that decide a write are repeated
// inside that transaction, so several processes can share one file without
// double claims or lost updates. Worker writes are fenced by
// `WHERE state = 'running' AND worker = ? AND attempt = ?`.
#include <map>

#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue_impl.h"
#include "jobs/time_format.h"

namespace ns::jobs {
namespace sqlite {

SqliteQueue::SqliteQueue(const std::string& path, const SqliteOptions& options)
    : db_(path, options),
      lease_watch_ms_(options.lease_watch_ms),
      max_backoff_ms_(options.max_backoff_ms),
      on_clock_disagreement_(options.on_clock_disagreement) {
  // Check before migrating: a damaged file must not be rewritten.
  if (const std::string problems = db_.integrity_problems(options.integrity_check); !problems.empty()) {
    const char* check = options.integrity_check == IntegrityCheck::full ? "integrity_check" : "quick_check";
    throw DatabaseError(false, "database " + path + " failed PRAGMA " + check + ": " + problems +
                                   "; stop every nightshift process, keep a copy of the file, then rebuild it "
                                   "with `sqlite3 " +
                                   path +
                                   " .recover | sqlite3 recovered.db` (see "
                                   "docs/operations.md)");
  }
  if (!options.read_only) {
    sqlite::migrate(db_);
    return;
  }
  const int64_t version = db_.scalar_int("PRAGMA user_version");
  if (version != sqlite::latest_schema_version()) {
    throw DatabaseError(false, "database " + path + " has schema version " + std::to_string(version) +
                                   " and this nightshift reads version " +
                                   std::to_string(sqlite::latest_schema_version()) +
                                   "; it is open read-only here, so it cannot be upgraded: run the daemon (or any "
                                   "nightshift command) once as a user that may write it, then read it again");
  }
}

std::optional<Checkpoint> SqliteQueue::checkpoint(int64_t id) {
  auto st = db_.cached("SELECT attempt, tokens, saved_ms, choices, logprobs FROM checkpoints WHERE job_id = ?1");
  st->bind(1, id);
  if (!st->step()) return std::nullopt;
  Checkpoint c;
  c.attempt = static_cast<int32_t>(st->int64(0));
  c.tokens = tokens_from_json(st->text(1), id, db_.path());
  c.saved_ms = st->int64(2);
  c.more_tokens = token_lists_from_json(st->text(3), id, db_.path());
  c.logprobs = st->text(4);
  return c;
}

bool SqliteQueue::cancel_requested(int64_t id) {
  auto st = db_.cached("SELECT cancel_requested FROM jobs WHERE id = ?1");
  st->bind(1, id);
  return st->step() && st->int64(0) != 0;
}

std::optional<Job> SqliteQueue::get(int64_t id) {
  auto st = db_.cached(std::string(kSelectJob) + " WHERE j.id = ?1");
  st->bind(1, id);
  if (!st->step()) return std::nullopt;
  return read_job(StmtRow(*st), db_.path());
}

std::vector<Job> SqliteQueue::list(const ListFilter& filter) {
  std::string sql = kSelectJob;
  sql += " WHERE (?1 IS NULL OR j.state = ?1) AND (?3 IS NULL OR j.batch = ?3) AND (?4 IS NULL OR j.model = ?4)";
  sql += list_order_sql(filter.order);
  sql += " LIMIT ?2";
  auto st = db_.cached(sql);
  if (filter.state) {
    st->bind(1, state_name(*filter.state));
  } else {
    st->bind_null(1);
  }
  st->bind(2, int64_t{filter.limit > 0 ? filter.limit : -1});  // SQLite: negative = no limit
  st->bind_text_or_null(3, filter.batch);
  st->bind_text_or_null(4, filter.model);
  std::vector<Job> jobs;
  while (st->step()) jobs.push_back(read_job(StmtRow(*st), db_.path()));
  return jobs;
}

std::vector<AttemptRecord> SqliteQueue::attempts(int64_t id) {
  auto st = db_.cached(R"(
    SELECT attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
    FROM attempts WHERE job_id = ?1 ORDER BY attempt)");
  st->bind(1, id);
  std::vector<AttemptRecord> out;
  while (st->step()) out.push_back(read_attempt(StmtRow(*st), 0));
  return out;
}

std::vector<BatchSummary> SqliteQueue::batches(int32_t limit) {
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
  // What each batch's ETA reads (jobs/batch_eta.h; the batch_summary view sums the same).
  auto sums = db_.cached(R"(
    SELECT coalesce(min(j.started_ms), 0),
           sum(j.state = 'done'), coalesce(sum(CASE WHEN j.state = 'done' THEN r.completion_tokens END), 0),
           coalesce(sum(r.completion_tokens), 0),
           sum(j.state = 'running'), coalesce(sum(CASE WHEN j.state = 'running' THEN j.progress_generated END), 0),
           coalesce(sum(CASE WHEN j.state = 'running' THEN j.max_tokens * j.n END), 0),
           sum(j.state = 'queued' AND j.error_kind IS NOT ?2),
           coalesce(sum(CASE WHEN j.state = 'queued' AND j.error_kind IS NOT ?2 THEN j.max_tokens * j.n END), 0),
           coalesce(sum(r.load_ms), 0)
    FROM jobs AS j LEFT JOIN results AS r ON r.job_id = j.id WHERE j.batch = ?1)");
  for (BatchSummary& b : out) {
    b.counts = counts_of(b.name);
    sums->bind(1, b.name).bind(2, std::string_view(kHeldErrorKind));
    if (sums->step()) {
      BatchProgress& p = b.progress;
      p.first_started_ms = sums->int64(0);
      p.done = sums->int64(1);
      p.done_tokens = sums->int64(2);
      p.result_tokens = sums->int64(3);
      p.running = sums->int64(4);
      p.running_generated = sums->int64(5);
      p.running_max_tokens = sums->int64(6);
      p.queued = sums->int64(7);
      p.queued_max_tokens = sums->int64(8);
      p.load_ms = sums->real(9);
    }
    sums->reset();
  }
  return out;
}

// The sums ModelTotals describes; the weighted sums let readers form token-weighted means.
const char* const kResultSums =
    "count(*), sum(r.prompt_tokens), sum(r.completion_tokens), sum(r.bytes_read), sum(r.queue_wait_ms), "
    "sum(r.decode_share_ms), sum(r.io_wait_ms), sum(r.compute_ms), sum(r.cache_hit_rate * r.completion_tokens), "
    "sum(r.avg_batch_size * r.completion_tokens)";

std::vector<ModelTotals> SqliteQueue::model_totals() {
  std::map<std::string, ModelTotals> by_model;
  auto states = db_.cached("SELECT model, state, count(*) FROM jobs GROUP BY model, state");
  while (states->step()) {
    ModelTotals& m = by_model[states->text(0)];
    add_count(m.jobs, state_from_column(states->text(1), 0, db_.path()), states->int64(2));
  }
  auto sums = db_.cached(std::string("SELECT j.model, ") + kResultSums +
                         " FROM results r JOIN jobs j ON j.id = r.job_id GROUP BY j.model");
  while (sums->step()) {
    ModelTotals& m = by_model[sums->text(0)];
    m.results = sums->int64(1);
    m.prompt_tokens = sums->int64(2);
    m.completion_tokens = sums->int64(3);
    m.bytes_read = static_cast<uint64_t>(sums->int64(4));
    m.queue_wait_ms = sums->real(5);
    m.decode_share_ms = sums->real(6);
    m.io_wait_ms = sums->real(7);
    m.compute_ms = sums->real(8);
    m.cache_hit_rate_x_tokens = sums->real(9);
    m.batch_size_x_tokens = sums->real(10);
  }
  std::vector<ModelTotals> out;
  for (auto& [name, m] : by_model) {
    m.model = name;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<TokenBucket> SqliteQueue::token_history(int64_t since_ms, int64_t bucket_ms) {
  if (bucket_ms <= 0) throw Error(ErrorKind::invalid_input, "token_history: bucket_ms must be > 0");
  auto st = db_.cached(R"(
    SELECT (j.finished_ms / ?2) * ?2 AS start, count(*), sum(r.completion_tokens), sum(r.decode_share_ms)
    FROM results r JOIN jobs j ON j.id = r.job_id
    WHERE j.finished_ms >= ?1 GROUP BY start ORDER BY start)");
  st->bind(1, since_ms).bind(2, bucket_ms);
  std::vector<TokenBucket> out;
  while (st->step()) out.push_back({st->int64(0), st->int64(1), st->int64(2), st->real(3)});
  return out;
}

int64_t SqliteQueue::prune(int64_t older_than_ms, const std::vector<JobState>& states, bool dry_run) {
  const std::string list = final_states_csv(states);
  if (list.empty()) return 0;
  const int64_t cutoff = now_epoch_ms() - older_than_ms;
  if (dry_run) {
    Stmt count(db_,
               "SELECT count(*) FROM jobs WHERE finished_ms < ?1 AND instr(',' || ?2 || ',', ',' || state || ',') > 0");
    count.bind(1, cutoff).bind(2, list);
    count.step();
    return count.int64(0);
  }
  WriteTransaction tx(db_);
  // The jobs' rows in the other tables go first (not left to ON DELETE CASCADE,
  // so a connection with foreign keys off cannot leave orphans).
  const char* const kOld =
      "SELECT id FROM jobs WHERE finished_ms < ?1 AND instr(',' || ?2 || ',', ',' || state || ',') > 0";
  for (const char* table : {"results", "attempts", "checkpoints"}) {
    Stmt del(db_, std::string("DELETE FROM ") + table + " WHERE job_id IN (" + kOld + ")");
    del.bind(1, cutoff).bind(2, list);
    del.run();
  }
  Stmt count(db_, std::string("SELECT count(*) FROM (") + kOld + ")");
  count.bind(1, cutoff).bind(2, list);
  count.step();
  const int64_t n = count.int64(0);
  count.reset();
  Stmt del(db_, "DELETE FROM jobs WHERE finished_ms < ?1 AND instr(',' || ?2 || ',', ',' || state || ',') > 0");
  del.bind(1, cutoff).bind(2, list);
  del.run();
  tx.commit();
  return n;
}

std::string SqliteQueue::register_worker(const WorkerInfo& info, const WorkerObjection& objection) {
  WriteTransaction tx(db_);  // BEGIN IMMEDIATE: a second daemon's check waits for this one's row
  if (objection) {
    std::string refusal = objection(workers());
    if (!refusal.empty()) return refusal;
  }
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
  return "";
}

void SqliteQueue::worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs,
                                   const std::string& problem) {
  WriteTransaction tx(db_);
  const int64_t now = now_epoch_ms();
  auto up = db_.cached(
      "UPDATE workers SET heartbeat_ms = ?2, heartbeat_at = ?3, model = ?4, jobs = ?5, stopped_ms = NULL, "
      "stopped_at = NULL, problem = ?6 WHERE id = ?1");
  up->bind(1, id).bind(2, now).bind(3, iso8601_utc(now)).bind(4, model).bind(5, ints_to_json(jobs)).bind(6, problem);
  up->run();
  tx.commit();
}

void SqliteQueue::worker_stopped(const std::string& id) {
  WriteTransaction tx(db_);
  const int64_t now = now_epoch_ms();
  auto up = db_.cached("UPDATE workers SET stopped_ms = ?2, stopped_at = ?3, jobs = '[]' WHERE id = ?1");
  up->bind(1, id).bind(2, now).bind(3, iso8601_utc(now));
  up->run();
  tx.commit();
}

std::vector<WorkerInfo> SqliteQueue::workers() {
  auto st = db_.cached(kSelectWorkers);
  std::vector<WorkerInfo> out;
  while (st->step()) {
    WorkerInfo w = read_worker(StmtRow(*st));
    w.jobs = ids_from_json(st->text(8), w.id, db_.path());
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace sqlite

std::unique_ptr<Queue> open_sqlite_queue(const std::string& path, const SqliteOptions& options) {
  return std::make_unique<sqlite::SqliteQueue>(path, options);
}

}  // namespace ns::jobs
