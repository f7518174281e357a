// The job state machine of jobs/queue.h, once for every backend: which rows
// change, in which order, with which fence, attempt outcome and error text,
// when a job is claimed, completed, failed, cancelled, released, recovered or
// retried. A backend derives from TransitionQueue and supplies only the
// primitives below, in its own SQL (and its own clock: a PostgreSQL backend
// takes every time from the server). Each primitive marked "in a write"
// runs inside the transaction begin_write() opened; the transaction is what
// makes a read-then-write decision safe against other processes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jobs/job_row.h"
#include "jobs/queue.h"

namespace ns::jobs {

// An open write transaction; rolls back when destroyed unless commit() ran.
class WriteTx {
 public:
  virtual ~WriteTx() = default;
  virtual void commit() = 0;
};

// A backend's RAII transaction type `Tx` (constructed from its connection) as a WriteTx.
template <class Tx>
class HeldTx final : public WriteTx {
 public:
  template <class Db>
  explicit HeldTx(Db& db) : tx_(db) {}
  void commit() override { tx_.commit(); }

 private:
  Tx tx_;
};

// How an attempt ended, for the attempts table.
struct AttemptEnd {
  const char* outcome;
  const std::string* error_kind = nullptr;
  const std::string* error = nullptr;
};

// A running job whose attempt is ending without a result (a transient
// failure, a release, or a worker gone), as the state machine sees it.
struct Orphan {
  int64_t id = 0;
  int32_t attempt = 0, attempts = 0, max_attempts = 1;
  bool cancel_requested = false;
  std::string worker;
  int64_t lease_expires_ms = 0;
  bool run_alone = false;
  // Its worker ran other jobs beside it when it stopped (kSharedCrash), so
  // the crash is not charged to it (recovery only; false elsewhere).
  bool shared = false;

  Lease lease() const { return {id, worker, attempt}; }
};
// Columns id, attempt, attempts, max_attempts, cancel_requested, worker,
// lease_expires_ms (NULL as 0), run_alone, and the kSharedCrash test.
Orphan read_orphan(const Row& row);

// SQL, both backends, over a running row `jobs`: whether another attempt of
// its worker was open, or was ended by recovery after this job's attempt
// began: the worker died (or hung) with that job beside this one.
extern const char* const kSharedCrash;

// Which running jobs recovery takes: those whose lease expired, or (worker
// not empty) every job running under that worker.
struct OrphanScope {
  std::string worker;
  bool expired() const { return worker.empty(); }
};

// The SQL condition (both backends) for a running job whose lease cannot be
// trusted, `now` being the backend's clock expression: the lease expired; or
// its worker's row says it holds nothing (stopped: a clean exit released all
// it held); or that worker was last heard from more than kClockBackMs in the
// future: the clock went back since (#30 L), so its leases, stamped before
// the jump, would otherwise look hours ahead. A live worker's next heartbeat
// (every few seconds) stamps the new clock.
inline constexpr int64_t kClockBackMs = 60'000;
std::string untrusted_lease_sql(const std::string& now);

// A claimable job at the head of the queue.
struct QueueHead {
  int64_t id = 0;
  std::string model;
  bool run_alone = false;
};

// The ids to claim from the head of the queue (in claim order): the leading
// run of jobs for `model` (empty: the first job's model), never jumping a
// job ahead in the queue. A run_alone job only by itself and only for a
// caller with nothing running (`model` empty); the run ends before it.
std::vector<int64_t> leading_run(const std::vector<QueueHead>& head, const std::string& model);

// Adds `n` jobs in `state` to the counts.
void add_count(QueueCounts& c, JobState state, int64_t n);

class TransitionQueue : public Queue {
 public:
  SubmitOutcome submit(const JobSpec& spec) override;
  std::vector<SubmitOutcome> submit_many(std::span<const JobSpec> specs) override;

  std::optional<Job> claim(const std::string& worker, int64_t lease_ms) override;
  std::optional<std::string> next_model(const std::vector<std::string>& servable) override;
  using Queue::claim_batch;
  std::vector<Job> claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs, const std::string& model,
                               const std::vector<std::string>& servable) override;
  using Queue::heartbeat;
  bool heartbeat(const Lease& lease, int64_t lease_ms, const std::optional<JobProgress>& progress) override;
  using Queue::save_checkpoint;
  bool save_checkpoint(const Lease& lease, const Checkpoint& cp, int64_t lease_ms) override;

  bool complete(const Lease& lease, const JobResult& result) override;
  bool fail(const Lease& lease, const std::string& error_kind, const std::string& message) override;
  std::optional<JobState> fail_transient(const Lease& lease, const std::string& error_kind, const std::string& message,
                                         const Backoff& backoff) override;
  bool finish_cancelled(const Lease& lease, const JobResult& partial) override;
  bool release(const Lease& lease, const std::string& reason) override;

  Recovery recover_expired(const Backoff& backoff) override;
  Recovery recover_worker(const std::string& worker, const Backoff& backoff) override;

  bool cancel(int64_t id) override;
  RetryOutcome retry(int64_t id, const std::string& model) override;
  QueueCounts counts() override { return counts_of(""); }
  QueueCounts counts(const std::string& batch) override { return counts_of(batch); }

  // One transaction: the copies (refused whole when keep_ids meets a taken
  // id) and, for a named source, the page's line in queue_migrations.
  std::vector<SubmitOutcome> import_jobs(std::span<const JobCopy> copies, bool keep_ids,
                                         const std::string& source) override;

 protected:
  // ---- transactions and submitting --------------------------------------------
  virtual std::unique_ptr<WriteTx> begin_write() = 0;
  // In a write: one new job, or the job its idempotency key already names.
  virtual SubmitOutcome insert(const JobSpec& spec) = 0;

  // ---- claiming -----------------------------------------------------------------
  // Outside a transaction: whether a claim could find anything (idle daemons
  // poll; this must not take the write lock). `servable_json`: "" or a JSON
  // array of model names.
  virtual bool anything_claimable(const std::string& servable_json) = 0;
  // In a write: up to `limit` claimable jobs in claim order (priority desc, id
  // asc), only models in `servable_json` when given, locked against other claimers.
  virtual std::vector<QueueHead> claimable_head(int limit, const std::string& servable_json) = 0;
  // In a write, after claimable_head(): claims these queued jobs for
  // `worker` (state, attempt, attempts, lease, an attempts row opened) and
  // returns them as they are now, in the order given.
  virtual std::vector<Job> claim_ids(const std::vector<int64_t>& ids, const std::string& worker, int64_t lease_ms) = 0;

  // ---- fenced writes about a running job (false / nullopt: fence broken) ---------
  // In a write: the job (locked) while `lease` still holds it.
  virtual std::optional<Orphan> running_under(const Lease& lease) = 0;
  // In a write: lease to now + lease_ms, and the progress when given.
  virtual bool extend_lease(const Lease& lease, int64_t lease_ms, const JobProgress* progress) = 0;
  // In a write: replaces the job's checkpoint (the lease is already extended).
  virtual void put_checkpoint(const Lease& lease, const Checkpoint& cp) = 0;
  // In a write: running -> `state` (finished now, lease cleared, error set or cleared).
  virtual bool finish_fenced(const Lease& lease, const char* state, const std::string* error_kind,
                             const std::string* error) = 0;
  // In a write: running -> queued, claimable after now + delay_ms, with the
  // attempt's error; worker, start and lease cleared.
  virtual void requeue_fenced(const Lease& lease, int64_t delay_ms, const std::string& error_kind,
                              const std::string& error) = 0;
  // In a write: running -> queued at once, giving the attempt back (attempts - 1, not below 0);
  // run_alone set when asked (a crash beside other jobs), else left as it is.
  // `held` (a daemon that cannot serve the job's model, or null): the job's
  // error_kind becomes kHeldErrorKind with it as the error (the job is held,
  // jobs::is_held); null clears a held error left from an earlier release.
  virtual void release_fenced(const Lease& lease, bool run_alone, const std::string* held) = 0;
  // In a write: closes the attempts row of `lease` (ended now).
  virtual void end_attempt(const Lease& lease, const AttemptEnd& end) = 0;
  // In a write: stores (or replaces) the job's result.
  virtual void write_result(int64_t id, const JobResult& result) = 0;
  virtual void drop_checkpoint(int64_t id) = 0;

  // ---- recovery -----------------------------------------------------------------
  // Outside a transaction: whether orphans() could find anything.
  virtual bool any_orphan(const OrphanScope& scope) = 0;
  // In a write: the running jobs in `scope`, id order, locked (PostgreSQL
  // skips rows another recoverer holds).
  virtual std::vector<Orphan> orphans(const OrphanScope& scope) = 0;

  // ---- people's side --------------------------------------------------------------
  // In a write: the job's state (row locked), nullopt when unknown.
  virtual std::optional<std::string> locked_state_of(int64_t id) = 0;
  // In a write: a job that is not running -> `state` (finished now, error and lease cleared).
  virtual void finish_unfenced(int64_t id, const char* state) = 0;
  virtual void request_cancel(int64_t id) = 0;
  // In a write: a final job back to queued as new (attempts 0, run_alone,
  // error, times, cancel flag, backoff and result cleared), on `model` unless it is empty.
  virtual void reset_to_queued(int64_t id, const std::string& model) = 0;
  // The counts of one batch's jobs ("" = every job).
  virtual QueueCounts counts_of(const std::string& batch) = 0;

  // ---- copying a queue (import_jobs) ------------------------------------------------
  // In a write: throws DatabaseError naming a copy's id this queue already has.
  virtual void refuse_taken_ids(std::span<const JobCopy> copies) = 0;
  // In a write: one exported job as it was, or the job its idempotency key already names.
  virtual SubmitOutcome import_one(const JobCopy& c, bool keep_ids) = 0;
  // In a write: adds a page to `source`'s line in queue_migrations (created
  // with keep_ids; last_source_id raised, finished_ms cleared, counts added).
  virtual void mark_page(const std::string& source, bool keep_ids, int64_t last_source_id, int64_t copied,
                         int64_t skipped) = 0;
  // In a write, after copies kept their ids: later submits get ids above them.
  virtual void after_kept_ids() {}

 private:
  void validate(const JobSpec& spec, const std::string& which);
  // The fenced end of an attempt with a result (done, or cancelled with the partial one).
  bool end_with_result(const Lease& lease, const char* state, const JobResult& result);
  // In a write: finish_fenced() and the checkpoint dropped (kept for `dead`: retry resumes it).
  bool end_running(const Lease& lease, const char* state, const std::string* error_kind, const std::string* error);
  // In a write, for a running job whose attempt has ended without a result:
  // cancelled if asked, queued after a backoff while attempts are left, else dead.
  JobState requeue_or_bury(const Orphan& job, const std::string& error_kind, const std::string& error,
                           const Backoff& backoff);
  Recovery recover(const OrphanScope& scope, const char* outcome, const Backoff& backoff);
};

}  // namespace ns::jobs
