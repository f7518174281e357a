// The job queue: what the CLI submits to and the daemon claims from.
// One interface, backends behind it (SQLite now: jobs/sqlite_queue.cpp; a
// server database later), so the daemon and the CLI never see SQL.
//
// Contract: every method is one transaction; methods throw DatabaseError
// (ns::Error of kind database, with the backend's message and the database
// named) on failure, marked transient when retrying later may succeed (lock
// held too long, disk full, I/O error). A Queue object is used from one
// thread; several threads and processes may each use their own Queue on the
// same database at once.
//
// Leases: claim() gives the job to one worker until lease_expires_ms; the
// worker extends it with heartbeat() or save_checkpoint(). Every write a
// worker makes about its job (heartbeat, checkpoint, complete, fail, release,
// finish_cancelled) is fenced by the Lease it got from claim(): it changes
// nothing and returns false unless the job is still running under that same
// worker *and* attempt. A worker that finds its fence broken (its lease
// expired and another worker recovered the job) must drop the job. A job
// whose lease expired goes back to the queue (or to `dead` after
// max_attempts) only through recover_expired(), which every daemon calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/util/error.h"
#include "jobs/backoff.h"

namespace ns::jobs {

// queued -> running (claim) -> done | failed | cancelled | queued | dead.
// `dead`: a transient failure or an expired lease with no attempts left.
// failed | dead | cancelled -> queued again with retry().
enum class JobState { queued, running, done, failed, cancelled, dead };
inline constexpr JobState kAllJobStates[] = {JobState::queued,    JobState::running,   JobState::done,
                                             JobState::failed,    JobState::cancelled, JobState::dead};
const char* state_name(JobState s);
std::optional<JobState> parse_state(const std::string& s);

// A queue operation failed. transient(): the same call may succeed later
// (database locked beyond the busy timeout, disk full, I/O error); otherwise
// the database itself is unusable (corrupt, not a database, newer schema).
class DatabaseError : public Error {
 public:
  DatabaseError(bool transient, const std::string& what) : Error(ErrorKind::database, what), transient_(transient) {}
  bool transient() const { return transient_; }

 private:
  bool transient_;
};

// Prompts longer than this are refused at submit (the daemon checks again).
inline constexpr size_t kMaxPromptBytes = 8u << 20;
inline constexpr int32_t kDefaultMaxAttempts = 3;
inline constexpr int32_t kMaxMaxAttempts = 100;

struct JobSpec {
  std::string model;            // a model name from the daemon config's `models:` map
  std::string prompt;           // valid UTF-8, 1..kMaxPromptBytes bytes
  SamplingParams sampling;
  int32_t priority = 0;         // higher runs first; ties run oldest first
  std::string idempotency_key;  // empty = none; a second submit with the same key returns the first job
  int32_t max_attempts = kDefaultMaxAttempts;  // 1..kMaxMaxAttempts claims that may end in a crash or transient failure
  int64_t not_before_ms = 0;    // epoch ms; 0 = claimable at once
};

// Empty when the spec can be queued, else what is wrong and how to fix it.
// Every backend's submit() calls it; the daemon calls it again on claimed
// rows (they may have been written by hand or by an older client).
std::string spec_problem(const JobSpec& spec);
// The byte offset of the first invalid UTF-8 sequence in `s`, or npos.
size_t invalid_utf8_offset(std::string_view s);

struct JobResult {
  std::string text;
  std::string finish_reason;   // "stop", "length", "cancelled"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double queue_wait_ms = 0, load_ms = 0, prefill_ms = 0, decode_ms = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  uint64_t peak_rss_bytes = 0;
  uint64_t bytes_read = 0;
};

// What a worker holds while it runs a job; the fence of every write about it.
struct Lease {
  int64_t job_id = 0;
  std::string worker;
  int32_t attempt = 0;
};

struct Job {
  int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::queued;
  int64_t created_ms = 0, started_ms = 0, finished_ms = 0;  // epoch ms; 0 = not yet
  // started_ms is the latest claim (a released job is claimed again later).
  std::string worker;           // who claimed it last
  int32_t attempts = 0;         // claims counted toward max_attempts (a graceful release gives one back)
  int32_t attempt = 0;          // number of the latest claim: 1, 2, ... never reused
  int64_t lease_expires_ms = 0; // running jobs only
  bool cancel_requested = false;
  std::string error_kind, error;  // failed/dead jobs; queued jobs: the last attempt's transient error
  std::optional<JobResult> result;

  Lease lease() const { return {id, worker, attempt}; }
};

// Completion tokens generated so far, saved while the job runs.
struct Checkpoint {
  std::vector<int32_t> tokens;
  int32_t attempt = 0;  // the attempt that saved it
  int64_t saved_ms = 0;
};

// One claim of a job and how it ended.
struct AttemptRecord {
  int32_t attempt = 0;
  std::string worker;
  int64_t started_ms = 0, ended_ms = 0;  // ended 0 = still running
  int32_t resumed_tokens = 0;            // checkpointed tokens it started from
  // "" while running, else done, failed, cancelled, released,
  // transient_error, lease_expired (recovered by any worker) or abandoned
  // (recovered by the same worker id after a restart).
  std::string outcome;
  std::string error_kind, error;
};

struct SubmitOutcome {
  int64_t id = 0;
  bool created = true;  // false: the idempotency key matched an existing job
};

struct ListFilter {
  std::optional<JobState> state;
  int32_t limit = 50;  // newest first; <= 0 means no limit
};

struct QueueCounts {
  int64_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0, dead = 0;
  int64_t retry_waiting = 0;  // of the queued: waiting out a retry backoff after a failed attempt
};

// What a recovery pass did to jobs whose worker is gone.
struct Recovery {
  int64_t requeued = 0, dead = 0, cancelled = 0;
  int64_t total() const { return requeued + dead + cancelled; }
};

enum class RetryOutcome { requeued, not_found, not_retryable };

class Queue {
 public:
  virtual ~Queue() = default;

  // ---- submitting -----------------------------------------------------------
  // Throws ns::Error(invalid_input) with spec_problem() before touching the
  // database if the spec is bad.
  virtual SubmitOutcome submit(const JobSpec& spec) = 0;
  // All or nothing, in one transaction (a bad spec, named by its index,
  // rejects the lot): one commit for many jobs.
  virtual std::vector<SubmitOutcome> submit_many(std::span<const JobSpec> specs) = 0;

  // ---- the worker's side ----------------------------------------------------
  // Claims the best claimable job (queued, not_before passed; priority desc,
  // then id asc) for `worker`: state -> running, attempt + 1, attempts + 1,
  // lease until now + lease_ms, an `attempts` row opened. nullopt when none.
  virtual std::optional<Job> claim(const std::string& worker, int64_t lease_ms) = 0;
  // Extends the lease to now + lease_ms. False: the fence is broken.
  virtual bool heartbeat(const Lease& lease, int64_t lease_ms) = 0;
  // Replaces the job's checkpoint with `tokens` and extends the lease.
  virtual bool save_checkpoint(const Lease& lease, std::span<const int32_t> tokens, int64_t lease_ms) = 0;
  virtual std::optional<Checkpoint> checkpoint(int64_t id) = 0;

  // The ends of an attempt. Each returns false (and writes nothing) when the
  // fence is broken. A job that reaches done/failed/cancelled/dead loses its
  // checkpoint.
  virtual bool complete(const Lease& lease, const JobResult& result) = 0;
  // Permanent failure (bad input, bad model): `failed` at once.
  virtual bool fail(const Lease& lease, const std::string& error_kind, const std::string& message) = 0;
  // Transient failure: back to queued, not claimable for backoff_delay_ms(attempts),
  // or `dead` when attempts reached max_attempts. The new state; nullopt = fence broken.
  virtual std::optional<JobState> fail_transient(const Lease& lease, const std::string& error_kind,
                                                 const std::string& message, const Backoff& backoff) = 0;
  // Marks the job cancelled (the worker saw cancel_requested), keeping the partial result.
  virtual bool finish_cancelled(const Lease& lease, const JobResult& partial) = 0;
  // Back to queued at once (graceful shutdown mid-job) keeping its checkpoint;
  // the attempt does not count (attempts - 1). A job whose cancel was
  // requested meanwhile becomes cancelled instead.
  virtual bool release(const Lease& lease) = 0;

  // ---- recovery -------------------------------------------------------------
  // Running jobs whose lease expired: back to queued after a backoff (the
  // interrupted attempt counts), `dead` when out of attempts, `cancelled` if
  // a cancel was requested. Their checkpoint is kept, so they resume.
  virtual Recovery recover_expired(const Backoff& backoff) = 0;
  // The same for every job still running under `worker`, expired or not: at
  // start-up a daemon with a fixed, unique worker_id knows those were left by
  // its own earlier process.
  virtual Recovery recover_worker(const std::string& worker, const Backoff& backoff) = 0;

  // ---- people's side --------------------------------------------------------
  // Queued jobs become cancelled at once; running jobs get cancel_requested
  // and the worker finishes them as cancelled. False if the id is unknown or already final.
  virtual bool cancel(int64_t id) = 0;
  virtual bool cancel_requested(int64_t id) = 0;
  // A failed, dead or cancelled job goes back to queued as new: attempts 0,
  // error, result and checkpoint cleared (it starts over; the history stays
  // in the attempts table).
  virtual RetryOutcome retry(int64_t id) = 0;
  virtual std::optional<Job> get(int64_t id) = 0;
  virtual std::vector<Job> list(const ListFilter& filter) = 0;
  virtual std::vector<AttemptRecord> attempts(int64_t id) = 0;
  virtual QueueCounts counts() = 0;
};

}  // namespace ns::jobs
