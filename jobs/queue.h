// The job queue: what the CLI submits to and the daemon claims from.
// One interface, two backends behind it (SQLite: jobs/sqlite_queue.cpp, the
// embedded default; PostgreSQL: jobs/pg_queue.cpp, a queue shared by a fleet;
// jobs/open_queue.h picks one by the database's name), so the daemon and the
// CLI never see SQL.
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
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/sampling_params.h"
#include "common/error.h"
#include "jobs/backoff.h"
#include "jobs/batch_eta.h"

namespace ns::jobs {

// queued -> running (claim) -> done | failed | cancelled | queued | dead.
// `dead`: a transient failure or an expired lease with no attempts left.
// failed | dead | cancelled -> queued again with retry().
enum class JobState { queued, running, done, failed, cancelled, dead };
inline constexpr JobState kAllJobStates[] = {JobState::queued, JobState::running,   JobState::done,
                                             JobState::failed, JobState::cancelled, JobState::dead};
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
  std::string model;  // a model name from the daemon config's `models:` map
  // The input: exactly one of the two. A completion job continues `prompt`
  // (valid UTF-8, 1..kMaxPromptBytes bytes); a chat job holds `messages`, a
  // JSON array of {"role": "...", "content": "..."} objects, which the daemon
  // renders with the model's chat template (engine/chat).
  std::string prompt;
  std::string messages;
  SamplingParams sampling;
  int32_t priority = 0;                        // higher runs first; ties run oldest first
  std::string idempotency_key;                 // empty = none; a second submit with the same key returns the first job
  int32_t max_attempts = kDefaultMaxAttempts;  // 1..kMaxMaxAttempts claims that may end in a crash or transient failure
  int64_t not_before_ms = 0;                   // epoch ms; 0 = claimable at once
  // Grouping and provenance (all optional): the named batch the job belongs
  // to (`submit --jsonl`, `submit --dir`), its custom_id (unique within the
  // batch), and where its input came from: a file, and the line for JSONL.
  std::string batch;
  std::string custom_id;
  std::string source_path;
  int32_t source_line = 0;  // 1-based; 0 = not from a line of a file

  bool is_chat() const { return !messages.empty(); }
};

// A document of `submit --dir` (daemon/cli/document_submit.h): it names its
// file (source_path) but no line of it. Such a job's prompt, when longer than
// the context, keeps its tail rather than failing (docs/long-context.md).
inline bool is_document_job(const JobSpec& spec) { return spec.source_line == 0 && !spec.source_path.empty(); }

// Empty when the spec can be queued, else what is wrong and how to fix it.
// Every backend's submit() calls it; the daemon calls it again on claimed
// rows (they may have been written by hand or by an older client).
std::string spec_problem(const JobSpec& spec);
// What a job submitted under an existing idempotency key asks for that the
// job the key names does not have: "" when they agree, else the differing
// parts ("prompt", "model", "sampling (max_tokens, seed)", ...). Priority,
// max_attempts and provenance are not content. `submit --key` refuses a
// difference rather than silently returning the old job.
std::string spec_difference(const JobSpec& existing, const JobSpec& wanted);

// Empty when `messages` is a non-empty JSON array of {"role": string,
// "content": string} objects, else what is wrong with it.
std::string messages_problem(const std::string& messages);
// The byte offset of the first invalid UTF-8 sequence in `s`, or npos.
size_t invalid_utf8_offset(std::string_view s);

// Choice k > 0 of a job with sampling.n > 1 (choice 0 is JobResult's own text).
struct JobChoice {
  std::string text;
  std::string finish_reason;
  int32_t completion_tokens = 0;
  bool operator==(const JobChoice&) const = default;
};

struct JobResult {
  std::string text;           // choice 0
  std::string finish_reason;  // "stop", "length", "cancelled" (choice 0)
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;        // every choice's, summed (OpenAI's usage)
  std::vector<JobChoice> more_choices;  // choices 1..n-1
  // sampling.logprobs: every choice's records, encoded (engine/sampler/logprobs.h); "" = none.
  std::string logprobs;
  double queue_wait_ms = 0, load_ms = 0, prefill_ms = 0, decode_ms = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  uint64_t peak_rss_bytes = 0;
  uint64_t bytes_read = 0;
  // Weight streaming (engine GenerationStats; a share of each batched step's
  // reads and waits, in proportion to the job's tokens in it).
  double read_gib_s = 0, io_wait_ms = 0, compute_ms = 0;
  double cache_hit_rate = 0, prefetch_accuracy = 0;
  double avg_batch_size = 0;  // mean number of jobs decoded together in the steps this job took
  // Its share of the wall time of the steps that decoded its tokens (engine
  // GenerationStats::decode_share_ms): summed over a batch, the time the batch was decoding.
  double decode_share_ms = 0;
  // A document longer than the context: prompt tokens dropped from its front
  // (prompt_tokens counts those kept); 0 otherwise (docs/long-context.md).
  int32_t prompt_tokens_dropped = 0;
  // Prompt tokens copied from a prefix snapshot another job of the batch
  // prefilled (engine GenerationStats::prefix_tokens); 0 = all computed.
  uint64_t prefix_tokens = 0;
};

// How far a running job has got, written with its heartbeats.
struct JobProgress {
  int32_t prompt_tokens = 0;
  int32_t prefilled = 0;   // prompt tokens processed so far
  int32_t generated = 0;   // completion tokens so far
  double tok_s = 0;        // recent decode rate
  int64_t updated_ms = 0;  // when it was written (set by the backend)
  // The daemon's estimate, at updated_ms, of the seconds left until
  // max_tokens (from its batch's step rate); < 0 = unknown. Readers count it
  // down from updated_ms (remaining_eta_s()).
  double eta_s = -1;
};

// A running job's ETA at `now_ms`: the daemon's estimate counted down from
// when it was written, not below 0; nullopt when the daemon gave none.
std::optional<double> remaining_eta_s(const JobProgress& p, int64_t now_ms);

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
  std::string worker;            // who claimed it last
  int32_t attempts = 0;          // claims counted toward max_attempts (a graceful release gives one back)
  int32_t attempt = 0;           // number of the latest claim: 1, 2, ... never reused
  int64_t lease_expires_ms = 0;  // running jobs only
  bool cancel_requested = false;
  // Its daemon died while it ran beside other jobs: claimed only alone from
  // now on, so a crash can be blamed on it (recover_expired()).
  bool run_alone = false;
  std::string error_kind, error;  // failed/dead jobs; queued jobs: the last attempt's transient error
  std::optional<JobResult> result;
  JobProgress progress;  // running jobs (and the last value for ended ones)

  Lease lease() const { return {id, worker, attempt}; }
};

// A queued job a daemon released because its own configuration cannot serve
// the job's model (a name or file it lacks, a model that does not fit): the
// job's error_kind is this and its error the daemon's reason, until a daemon
// runs it or `nightshift retry --model` re-points it.
inline constexpr const char* kHeldErrorKind = "daemon_config";
inline bool is_held(const Job& job) { return job.state == JobState::queued && job.error_kind == kHeldErrorKind; }

// Completion tokens generated so far, saved while the job runs.
struct Checkpoint {
  std::vector<int32_t> tokens;                    // choice 0
  std::vector<std::vector<int32_t>> more_tokens;  // choices 1..n-1
  std::string logprobs;                           // every choice's records of those tokens, encoded; "" = none
  int32_t attempt = 0;                            // the attempt that saved it
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
  std::string batch;   // "" = every job
  std::string model;   // "" = every model
  int32_t limit = 50;  // <= 0 means no limit
  enum class Order {
    newest_first,       // id descending (`nightshift list`)
    oldest_first,       // id ascending: submission order (exports)
    recently_finished,  // finished_ms descending; jobs not finished are left out
  } order = Order::newest_first;
};

struct QueueCounts {
  int64_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0, dead = 0;
  int64_t retry_waiting = 0;  // of the queued: waiting out a retry backoff after a failed attempt
  int64_t held = 0;           // of the queued: held by a daemon that cannot serve their model (is_held)
  std::string held_reason;    // the daemon's words, each held model's ("" when none is held): held_reason_text
};

// The held jobs of one model, and the daemon's reason for one of them.
struct HeldModel {
  std::string model;
  int64_t jobs = 0;
  std::string reason;
};
// One model: its reason as the daemon said it. Several (a night with a typo and a missing disk): each with its
// model and count, "model chta, 2 jobs: ...; model docs, 1 job: ...", so no cause hides behind another.
std::string held_reason_text(const std::vector<HeldModel>& held);

// What a recovery pass did to jobs whose worker is gone.
struct Recovery {
  int64_t requeued = 0, dead = 0, cancelled = 0;
  int64_t total() const { return requeued + dead + cancelled; }
};

enum class RetryOutcome { requeued, not_found, not_retryable };

struct BatchSummary {
  std::string name;
  int64_t created_ms = 0;   // first job's submission
  int64_t finished_ms = 0;  // last job's end; 0 while any is queued or running
  QueueCounts counts;
  BatchProgress progress;  // what its ETA reads (jobs/batch_eta.h)
};

// What one model's jobs add up to (`nightshift status --prometheus`, the status page): its jobs by
// state, and the sums of its results' statistics (jobs/result_stats.h) over every job that has a result (done,
// or cancelled with its partial one). Rates and shares are ratios of these sums: each job's stats are its share
// of the batched steps it took part in, so they add up across a batch.
struct ModelTotals {
  std::string model;
  QueueCounts jobs;     // retry_waiting is not counted here
  int64_t results = 0;  // jobs with a result
  int64_t prompt_tokens = 0, completion_tokens = 0;
  uint64_t bytes_read = 0;
  double queue_wait_ms = 0, decode_share_ms = 0, io_wait_ms = 0, compute_ms = 0;
  // Sums of cache_hit_rate and avg_batch_size weighted by each result's completion_tokens.
  double cache_hit_rate_x_tokens = 0, batch_size_x_tokens = 0;
};

// The results of the jobs that finished in [start_ms, start_ms + bucket_ms).
struct TokenBucket {
  int64_t start_ms = 0;
  int64_t jobs = 0;
  int64_t completion_tokens = 0;
  double decode_share_ms = 0;
};

// A daemon process taking jobs from the queue (the fleet in `nightshift status`).
struct WorkerInfo {
  std::string id;  // worker_id from the daemon config (unique per process)
  std::string host, model, version;
  int64_t pid = 0;
  int64_t started_ms = 0;     // set by register_worker
  int64_t heartbeat_ms = 0;   // set by register_worker / worker_heartbeat
  int64_t stopped_ms = 0;     // 0 = running (or died without saying so: see heartbeat_ms)
  std::vector<int64_t> jobs;  // the jobs it is running now
  // What its own configuration keeps it from serving ("" = nothing), e.g.
  // "model 'kimi' is not in /etc/nightshift/config.yaml (2 jobs left queued)".
  std::string problem;
};

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
  // Claims up to max_jobs jobs in one transaction, for a batch decoding
  // together: taken in claim order (priority desc, id asc) from the head of
  // the queue, stopping at the first claimable job whose model is not
  // `model` (empty: the first claimed job's model), so a batch never jumps a
  // job that is ahead of it in the queue. Each as claim() does. Empty when
  // none (or when the head of the queue wants another model).
  // A run_alone job is claimed only by itself and only when `model` is
  // empty (the caller runs nothing now, as a worker with an empty batch
  // says); the run stops before it otherwise. The caller claims nothing more
  // while it runs.
  // `servable`: the models this worker can run (empty: any). Jobs for other
  // models are invisible to it, left for the daemons that have them (a fleet
  // whose machines hold different models); the head-of-queue rule applies to
  // the rest.
  virtual std::vector<Job> claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs,
                                       const std::string& model, const std::vector<std::string>& servable) = 0;
  // The model of the job claim_batch(..., "", servable) would take first;
  // nullopt when none is claimable. Read without the write lock: a worker
  // loads that model before it claims, so a load that crashes or outlasts
  // the lease costs no job an attempt (another worker may take the job
  // meanwhile; the claim then finds what is left).
  virtual std::optional<std::string> next_model(const std::vector<std::string>& servable) = 0;
  std::vector<Job> claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs, const std::string& model) {
    return claim_batch(worker, lease_ms, max_jobs, model, {});
  }
  // Extends the lease to now + lease_ms and, when given, stores the job's
  // progress. False: the fence is broken.
  virtual bool heartbeat(const Lease& lease, int64_t lease_ms, const std::optional<JobProgress>& progress) = 0;
  bool heartbeat(const Lease& lease, int64_t lease_ms) { return heartbeat(lease, lease_ms, std::nullopt); }
  // Replaces the job's checkpoint with `cp` (tokens, more_tokens, logprobs;
  // attempt and saved_ms are the backend's) and extends the lease.
  virtual bool save_checkpoint(const Lease& lease, const Checkpoint& cp, int64_t lease_ms) = 0;
  bool save_checkpoint(const Lease& lease, std::span<const int32_t> tokens, int64_t lease_ms) {
    Checkpoint cp;
    cp.tokens.assign(tokens.begin(), tokens.end());
    return save_checkpoint(lease, cp, lease_ms);
  }
  virtual std::optional<Checkpoint> checkpoint(int64_t id) = 0;

  // The ends of an attempt. Each returns false (and writes nothing) when the
  // fence is broken. A job that reaches done/failed/cancelled loses its
  // checkpoint; a `dead` one keeps it, so retry() resumes it.
  virtual bool complete(const Lease& lease, const JobResult& result) = 0;
  // Permanent failure (bad input, bad model): `failed` at once.
  virtual bool fail(const Lease& lease, const std::string& error_kind, const std::string& message) = 0;
  // Transient failure: back to queued, not claimable for backoff_delay_ms(attempts),
  // or `dead` when attempts reached max_attempts. The new state; nullopt = fence broken.
  virtual std::optional<JobState> fail_transient(const Lease& lease, const std::string& error_kind,
                                                 const std::string& message, const Backoff& backoff) = 0;
  // Marks the job cancelled (the worker saw cancel_requested), keeping the partial result.
  virtual bool finish_cancelled(const Lease& lease, const JobResult& partial) = 0;
  // Back to queued at once (graceful shutdown mid-job, or a daemon whose own
  // configuration cannot run it) keeping its checkpoint; the attempt does not
  // count (attempts - 1). `reason` (may be empty) goes to the attempt's error,
  // with error_kind "daemon_config" (`nightshift show` lists it), and to the
  // job's: the job is held (is_held) until a daemon claims it again. A job whose
  // cancel was requested meanwhile becomes cancelled instead.
  virtual bool release(const Lease& lease, const std::string& reason = "") = 0;

  // ---- recovery -------------------------------------------------------------
  // Running jobs whose lease expired: back to queued after a backoff (the
  // interrupted attempt counts), `dead` when out of attempts, `cancelled` if
  // a cancel was requested. Their checkpoint is kept, so they resume.
  // Crash blame: a job whose worker ran other jobs beside it when it died
  // (another attempt of that worker still open, or ended by recovery after
  // this one began) is not charged: it goes back at once with the attempt
  // given back and run_alone set, and is claimed alone next time; only a
  // crash while running alone counts. A poison job thus dies after its own
  // max_attempts solo crashes, and the jobs that shared its batches lose
  // nothing. (Measured before: 12 kill -9 of a batch left 14 of 20 jobs dead.)
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
  // run_alone, error and result cleared, the history kept in the attempts
  // table. A dead job keeps its checkpoint and resumes from it unless `model`
  // changes; the others start over.
  // `model` not empty: the job runs on that model from now on (the fix for
  // jobs queued under a wrong model name; submit checks no names); a queued
  // job (held by daemons that cannot serve its model) is re-pointed too.
  virtual RetryOutcome retry(int64_t id, const std::string& model = "") = 0;
  virtual std::optional<Job> get(int64_t id) = 0;
  virtual std::vector<Job> list(const ListFilter& filter) = 0;
  virtual std::vector<AttemptRecord> attempts(int64_t id) = 0;
  virtual QueueCounts counts() = 0;
  // The counts of one batch's jobs.
  virtual QueueCounts counts(const std::string& batch) = 0;
  // Batches, most recently created first; limit <= 0: all of them.
  virtual std::vector<BatchSummary> batches(int32_t limit) = 0;
  // Every model's totals (ModelTotals), by model name.
  virtual std::vector<ModelTotals> model_totals() = 0;
  // The results of jobs finished since `since_ms` (epoch ms), in buckets of bucket_ms (> 0) aligned to
  // multiples of it, oldest first; buckets without a finished job are left out.
  virtual std::vector<TokenBucket> token_history(int64_t since_ms, int64_t bucket_ms) = 0;

  // ---- housekeeping (nightshift prune) ---------------------------------------
  // Deletes the jobs in `states` that finished more than older_than_ms ago
  // (by the backend's clock), with their attempts, checkpoints and results,
  // in one transaction; returns how many jobs went. Only final states are
  // ever deleted (queued and running jobs are skipped whatever `states`
  // says), so it is safe while daemons run. dry_run: counts them, deletes
  // nothing (prune --dry-run, and the count a confirmation names).
  virtual int64_t prune(int64_t older_than_ms, const std::vector<JobState>& states, bool dry_run) = 0;
  int64_t prune(int64_t older_than_ms, const std::vector<JobState>& states) {
    return prune(older_than_ms, states, false);
  }

  // ---- the fleet ------------------------------------------------------------
  // A daemon announces itself at start-up (insert or replace by id; clears
  // stopped_ms), keeps its row fresh with each heartbeat, and marks it
  // stopped when it exits cleanly. Rows stay for `nightshift status`.
  // `objection`, if given, is asked inside the same write transaction, over
  // the workers rows as they are; a non-empty answer registers nothing and is
  // returned. Two daemons starting under one id in the same instant are thus
  // serialized: the second sees the first's row.
  using WorkerObjection = std::function<std::string(const std::vector<WorkerInfo>&)>;
  virtual std::string register_worker(const WorkerInfo& info, const WorkerObjection& objection = {}) = 0;
  virtual void worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs,
                                const std::string& problem = "") = 0;
  virtual void worker_stopped(const std::string& id) = 0;
  virtual std::vector<WorkerInfo> workers() = 0;

  // ---- copying a queue to another database (nightshift migrate-queue) ------
  // Added with the PostgreSQL backend (issue 8), so a SQLite queue can move to
  // a server database (and back) with everything it knows.
  //
  // A job with all that belongs to it: every column (state, lease, attempts,
  // error, progress, times), its result, its attempt history and checkpoint.
  struct JobCopy {
    Job job;
    std::vector<AttemptRecord> history;
    std::optional<Checkpoint> checkpoint;
  };
  // Up to `limit` jobs with ids above `after_id`, in id order (page through
  // a queue of any size with the last id returned).
  virtual std::vector<JobCopy> export_jobs(int64_t after_id, int32_t limit) = 0;
  // Inserts the copies in one transaction, all or nothing, exactly as they
  // are (no state change, no new attempt; workers are not copied). keep_ids:
  // under their own ids (an id already taken is an error), so the ids `submit`
  // printed still name the same jobs, and later submits get higher ids; else
  // under new ids, in order. A copy whose idempotency key already names a job
  // here is not inserted: its outcome is that job's id with created = false.
  // A non-empty `source` names the queue the copies come from: the same
  // transaction records them in that source's MigrationMark (created on the
  // first page with this keep_ids; last_source_id becomes the last copy's id,
  // finished_ms 0 until finish_migration), so a copy cut off anywhere resumes
  // after the last page that committed and never inserts a job twice.
  virtual std::vector<SubmitOutcome> import_jobs(std::span<const JobCopy> copies, bool keep_ids,
                                                 const std::string& source) = 0;
  // What has been copied here from one source queue (schema/sqlite/010_queue_migrations.sql).
  struct MigrationMark {
    std::string source;
    bool keep_ids = false;
    int64_t started_ms = 0, updated_ms = 0;
    int64_t finished_ms = 0;     // 0: a run is under way, or was cut off
    int64_t last_source_id = 0;  // every source job up to this id is here (or was skipped)
    int64_t copied = 0, skipped = 0;
  };
  virtual std::optional<MigrationMark> migration_mark(const std::string& source) = 0;
  // Records that every job of `source` up to its mark is here (creates the
  // mark when no page was copied), as of now.
  virtual void finish_migration(const std::string& source, bool keep_ids) = 0;
};

}  // namespace ns::jobs
