// The daemon's worker loop: recover jobs whose worker is gone, claim a job
// under a lease, run it on the engine (resuming from its checkpoint), write
// the outcome under the lease's fence, repeat. One job at a time; the engine
// for the last model used is kept loaded, and replaced when a job names
// another model.
//
// Contract:
// - A job that cannot run ends `failed` at once when retrying cannot help
//   (model not in the config, corrupt model, invalid parameters, prompt too
//   long, ...) and goes back to the queue after a backoff when it can
//   (I/O errors, out of memory; `dead` after max_attempts): daemon/lib/failure.h.
// - While a job generates, its tokens are checkpointed every
//   checkpoint_tokens tokens or checkpoint_interval_ms, whichever comes first
//   (one small write, never one per token); a job claimed again resumes there.
// - `nightshift cancel` on a running job: noticed within cancel_poll_ms at
//   the next token; the job ends `cancelled`, keeping the partial text.
// - When `stop` becomes true (SIGINT/SIGTERM) the generation stops at the
//   next token, the tokens so far are checkpointed and the job is released
//   back to `queued` (the attempt does not count).
// - When the lease is lost (RunStatus::lease_lost, set by the heartbeat, or a
//   fenced write refused) the worker drops the job without writing anything.
// - A queue write that meets a transient database error (locked beyond the
//   busy timeout, disk full) is retried with backoff until it goes through or
//   the fence refuses it, so a finished job's result is not thrown away. Other
//   database errors propagate as DatabaseError (the daemon exits 1).
// Not thread-safe; `stop` may be set from a signal handler.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/lib/run_status.h"
#include "engine/engine.h"
#include "jobs/backoff.h"
#include "jobs/queue.h"

namespace ns::daemon {

struct Config;

struct WorkerOptions {
  std::string worker_id;
  std::map<std::string, std::string> models;  // name -> GGUF path
  std::string config_source;                  // named in "unknown model" messages
  EngineOptions engine;
  int poll_interval_ms = 1000;
  int cancel_poll_ms = 200;  // how often a running job re-reads cancel_requested
  int64_t lease_ms = 60'000;
  int checkpoint_tokens = 32;          // 0: not by count
  int checkpoint_interval_ms = 10'000;  // 0: not by time
  jobs::Backoff retry_backoff;                // a job after a transient failure or a crash
  jobs::Backoff database_backoff{100, 5000};  // a queue write that met a locked database or a full disk
};

WorkerOptions worker_options_from(const Config& config);

enum class JobOutcome {
  none_queued,           // nothing claimable
  done,
  failed,                // permanent failure
  retrying,              // transient failure: queued again after a backoff
  dead,                  // transient failure with no attempts left
  cancelled,
  released,              // stopped mid-job: queued again, resumes from the checkpoint
  lease_lost,            // another worker took the job over; nothing written
  database_unavailable,  // the claim met a locked database or a full disk; try again later
};
const char* outcome_name(JobOutcome o);

class Worker {
 public:
  // `status` is shared with the daemon's heartbeat thread; null: the worker keeps its own.
  Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop, RunStatus* status = nullptr);
  ~Worker();

  // Recovers expired leases, claims the best claimable job and runs it to one of its ends.
  JobOutcome run_next();

  // Runs jobs until `stop`; with `drain`, also returns once nothing is
  // claimable and no job is waiting out a retry backoff. Returns how many
  // jobs it claimed.
  int run(bool drain);

  // Called on every progress step of a running job, after the worker's own
  // checks (for status reporting; tests use it to act mid-generation).
  using ProgressObserver = std::function<void(const jobs::Job&, const GenerationProgress&)>;
  void set_progress_observer(ProgressObserver observer) { observer_ = std::move(observer); }
  // Called by run() before each claim: where the daemon applies a reloaded config.
  void set_between_jobs(std::function<void()> hook) { between_jobs_ = std::move(hook); }

  // New settings for the jobs that follow (SIGHUP); the worker id stays. A
  // loaded engine whose model path or engine options changed is dropped.
  void update_options(WorkerOptions options);
  const WorkerOptions& options() const { return options_; }

  // The model whose engine is loaded ("" when none).
  const std::string& loaded_model() const { return engine_model_; }

 private:
  struct Execution;
  Execution execute(const jobs::Job& job, const std::vector<int32_t>& resume);
  Engine& engine_for(const std::string& model, double& load_ms);
  JobOutcome record(const jobs::Job& job, const Execution& ex);
  void recover_orphans();
  bool retries_pending();
  void sleep_unless_stopped(int64_t ms) const;
  // Runs a queue write, retrying transient database errors with backoff.
  template <class F>
  auto persist(const char* what, int64_t job_id, F&& write) -> decltype(write());

  jobs::Queue& queue_;
  WorkerOptions options_;
  const std::atomic<bool>& stop_;
  RunStatus own_status_;
  RunStatus& status_;
  ProgressObserver observer_;
  std::function<void()> between_jobs_;
  std::unique_ptr<Engine> engine_;
  std::string engine_model_, engine_path_;
};

}  // namespace ns::daemon
