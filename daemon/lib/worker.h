// The daemon's worker: recover jobs whose worker is gone, claim jobs under
// leases, run them on the engine (resuming from their checkpoints), write
// each outcome under its lease's fence, repeat.
//
// This file is the step loop, one state machine: admit (claim jobs for the
// free slots, load their model when the batch is empty, join them to the
// batch) -> step (one forward pass for every job in it) -> finish (the jobs
// that ended leave, their outcomes are written). Its rooms: the engine host
// (engine_host.h: load, chat render), the progress policy
// (progress_policy.h: checkpoint, cancel, lease, between tokens), the
// outcome writer (outcome_writer.h: a job's end under its lease's fence) and
// their shared vocabulary (job_run.h: options, outcomes, a running job).
//
// Batching (continuous): up to max_batch jobs of one model decode together,
// one forward pass per step for all of them, so every expert read from disk
// serves every job routed to it (Engine::Batch). Jobs join at
// any step while slots are free (claim_batch: strictly from the head of the
// queue, so priority and age decide who enters and nobody is jumped) and
// leave as they finish; each keeps its own sampling, seed, stops and limits
// and gets the tokens it would get alone. When the head of the queue wants
// another model, no more jobs join; once the batch is empty the engine is
// replaced. max_batch 1 is strictly sequential execution. A job whose daemon
// died while it ran beside others (jobs/queue.h, crash blame) runs alone:
// nothing joins it, and it joins nothing.
//
// Contract:
// - A job that cannot run ends `failed` at once when retrying cannot help
//   (corrupt model, invalid parameters, prompt too long, ...) and goes back
//   to the queue after a backoff when it can (I/O errors, out of memory;
//   `dead` after max_attempts): daemon/lib/failure.h.
// - A job this daemon's own configuration cannot run (its model is not under
//   models:, memory_budget cannot load the model: DaemonConfigError) is
//   released, its attempt not counted, and stays queued. The worker then
//   claims no job of that model for a backoff (retry_backoff, doubling per
//   failure, at least 1 s and poll_interval_ms) while it serves the others, logs an error each time and shows
//   the reason in RunStatus::problem (the workers row, `nightshift status`).
//   A reloaded config (update_options) tries every model again at once.
// - While a job generates, its tokens are checkpointed every
//   checkpoint_tokens tokens or checkpoint_interval_ms, whichever comes first
//   (one small write, never one per token); a job claimed again resumes there.
// - `nightshift cancel` on a running job: noticed within cancel_poll_ms at
//   the next token; the job ends `cancelled`, keeping the partial text.
// - When `stop` becomes true (SIGINT/SIGTERM) the generation stops at the
//   next token, the tokens so far are checkpointed and the job is released
//   back to `queued` (the attempt does not count).
// - Jobs whose lease expired (a crashed daemon's) are taken back at start-up,
//   on every idle poll and every cancel_poll_ms while a batch runs.
// - When the lease is lost (RunStatus::lease_lost, set by the heartbeat, or a
//   fenced write refused) the worker drops the job without writing anything.
// - A queue write that meets a transient database error (locked beyond the
//   busy timeout, disk full) is retried with backoff until it goes through or
//   the fence refuses it, so a finished job's result is not thrown away. Other
//   database errors propagate as DatabaseError (the daemon exits 1).
// Not thread-safe; `stop` may be set from a signal handler.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/lib/engine_host.h"
#include "daemon/lib/job_run.h"
#include "daemon/lib/outcome_writer.h"
#include "daemon/lib/progress_policy.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/step_rate.h"
#include "engine/engine.h"
#include "jobs/queue.h"

namespace ns::daemon {

class Worker {
 public:
  // `status` is shared with the daemon's heartbeat thread; null: the worker keeps its own.
  Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop, RunStatus* status = nullptr);
  ~Worker();

  // Recovers expired leases, claims jobs while the batch has room, and steps
  // the batch until a job reaches one of its ends; returns that outcome
  // (none_queued when nothing runs and nothing is claimable). Jobs still in
  // the batch go on at the next call.
  JobOutcome run_next();

  // Runs jobs until `stop` (then the running ones are checkpointed and
  // released); with `drain`, also returns once nothing runs anywhere, nothing
  // is claimable and no job is waiting out a retry backoff: a job left
  // running by a killed daemon is waited for until its lease expires, then
  // taken over. Returns how many jobs reached an end.
  int run(bool drain);
  // After run(true): whether jobs of models this daemon cannot serve (a name or a file its configuration gets
  // wrong, a model that does not fit) were left queued, held; held_reason() says which and why.
  bool left_held() const { return left_held_; }
  const std::string& held_reason() const { return held_reason_; }
  // Jobs in the batch now.
  int active() const { return static_cast<int>(active_.size()); }

  // Called on every progress step of a running job, after the worker's own
  // checks (for status reporting; tests use it to act mid-generation).
  using ProgressObserver = ProgressPolicy::Observer;
  void set_progress_observer(ProgressObserver observer) { progress_.set_observer(std::move(observer)); }
  // Called by run() while no job is running: where the daemon applies a reloaded config.
  void set_between_jobs(std::function<void()> hook) { between_jobs_ = std::move(hook); }

  // New settings for the jobs that follow (SIGHUP); the worker id stays. A
  // loaded engine whose model path or engine options changed is dropped.
  void update_options(WorkerOptions options);
  const WorkerOptions& options() const { return options_; }

  // The model whose engine is loaded ("" when none).
  const std::string& loaded_model() const { return host_.model(); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Admitted { none, some, database_unavailable };
  // The states of the loop: admit (claim, load, join), step (a forward pass),
  // finish (the jobs that ended leave and are written).
  Admitted admit();
  void preload(const std::string& model);
  void start(const jobs::Job& job);
  void step();
  void finish(std::unique_ptr<RunningJob> run, const GenerationResult& gen);
  void estimate();
  void fail_all(const Execution& failure, bool drop_engine);
  void end(const jobs::Job& job, const Execution& ex);
  void log_run_summary();
  void recover_orphans();
  // For --drain: a job waits out a retry backoff, or runs under another
  // worker (a killed daemon's, until its lease expires and it is taken over).
  bool work_left();
  void sleep_unless_stopped(int64_t ms) const;
  // A model this daemon's configuration cannot serve: claims skip it until `until`.
  void block(const std::string& model, const std::string& reason, const std::vector<jobs::Job>& released);
  void unblock(const std::string& model);
  void publish_problem();

  jobs::Queue& queue_;
  WorkerOptions options_;
  const std::atomic<bool>& stop_;
  RunStatus own_status_;
  RunStatus& status_;
  EngineHost host_;
  ProgressPolicy progress_;
  OutcomeWriter writer_;
  std::function<void()> between_jobs_;
  std::vector<std::unique_ptr<RunningJob>>
      active_;                       // the jobs in the host's batch (stable addresses: progress callbacks)
  std::deque<JobOutcome> outcomes_;  // ends not yet returned by run_next()
  Clock::time_point last_admit_{};
  // A job of n choices found fewer than n free slots and went back to the
  // queue: no claims until that many are free (it is at the head again then),
  // rather than claiming and releasing it at every step.
  int wanted_slots_ = 0;
  // KV rows a job sent back for lack of them wanted (kBatchNoRoom):
  // no job is claimed until that many lie free, so a long job is not starved by short ones.
  int64_t wanted_rows_ = 0;
  bool waiting_for_others_ = false;  // work_left() said so once
  struct Blocked {
    std::string reason;         // the first line of the error
    Clock::time_point until{};  // no claims for the model before this
    int32_t failures = 0;       // for the backoff
    std::set<int64_t> jobs;     // the jobs released for it so far
  };
  std::map<std::string, Blocked> blocked_;  // by model name
  struct PreloadError {
    std::string model;
    std::exception_ptr error;  // null: the last preload succeeded
  } preload_error_;
  bool left_held_ = false;
  std::string held_reason_;
  bool slot_freed_ = false;  // a job left the batch since the last claim
  bool queue_more_ = false;  // the last claim filled every free slot: more may be queued
  StepRate rate_;            // the batch's step model: jobs' tok/s and ETAs
  // The batch run in progress (from the first job joining an empty batch to
  // the last one leaving), for its summary line.
  struct RunTotals {
    Clock::time_point started{};
    int64_t jobs = 0, steps = 0, tokens = 0;  // bytes and times: Engine::Batch::totals()
    int max_size = 0;
  } totals_;
};

}  // namespace ns::daemon
