// The vocabulary the worker's rooms share (daemon/lib/worker.h): the
// worker's options, how a job's run ends (JobOutcome), a job's state while it
// runs in the batch (RunningJob) and what its run produced before anything is
// written (Execution).
//
// The rooms: the step loop (worker.h: admit -> step -> finish), the engine
// host (engine_host.h: load, chat render), the progress policy
// (progress_policy.h: checkpoint, cancel, lease, between tokens) and the
// outcome writer (outcome_writer.h: a job's end written under its lease's fence).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/error.h"
#include "engine/engine.h"
#include "jobs/backoff.h"
#include "jobs/queue.h"

namespace ns::daemon {

struct Config;

struct WorkerOptions {
  std::string worker_id;
  std::map<std::string, std::string> models;          // name -> GGUF path
  std::map<std::string, std::string> chat_templates;  // name -> its chat template override (Config::chat_templates)
  std::string config_source;                          // named in "unknown model" messages
  bool claim_configured_only = false;                 // claim only jobs for `models` (config claim_models: configured)
  EngineOptions engine;               // engine.max_sequences: the batch size (config max_batch; 1 = sequential)
  std::string cpu_features = "auto";  // the kernels' ISA path (config cpu_features), set by the worker
  int poll_interval_ms = 1000;
  int cancel_poll_ms = 200;  // how often a running job re-reads cancel_requested
  int64_t lease_ms = 60'000;
  int checkpoint_tokens = 32;                 // 0: not by count
  int checkpoint_interval_ms = 10'000;        // 0: not by time
  jobs::Backoff retry_backoff;                // a job after a transient failure or a crash
  jobs::Backoff database_backoff{100, 5000};  // a queue write that met a locked database or a full disk
};

WorkerOptions worker_options_from(const Config& config);

enum class JobOutcome {
  none_queued,  // nothing claimable
  done,
  failed,    // permanent failure
  retrying,  // transient failure: queued again after a backoff
  dead,      // transient failure with no attempts left
  cancelled,
  released,              // stopped mid-job: queued again, resumes from the checkpoint
  lease_lost,            // another worker took the job over; nothing written
  database_unavailable,  // the claim met a locked database or a full disk; try again later
  unservable,            // this daemon's configuration cannot run it: released, left queued (DaemonConfigError)
};
const char* outcome_name(JobOutcome o);

// A job in the batch.
struct RunningJob {
  using Clock = std::chrono::steady_clock;
  jobs::Job job;
  int handle = -1;           // its Engine::Batch handle
  int32_t resumed = 0;       // checkpointed tokens it started from
  int32_t checkpointed = 0;  // tokens in the saved checkpoint
  // The model load it paid for: the first job to join the batch after a load
  // carries it whole, the others 0 (so a batch's sum is the loads it waited for).
  double load_ms = 0;
  bool stopped = false, cancelled = false, lost = false;  // why the progress policy said stop
  Clock::time_point last_poll{}, last_checkpoint{}, checkpoint_blocked_until{};
  // Its latest progress, for the batch's estimate after each step (StepRate).
  int32_t prompt_tokens = 0, prefilled = 0, generated = 0;
  double tok_s = 0;  // its rate now, from the batch's estimate
};

// What running a job produced, before anything is written to the queue.
struct Execution {
  JobOutcome outcome = JobOutcome::failed;  // done, failed, retrying, cancelled, released, unservable or lease_lost
  jobs::JobResult result;                   // done / cancelled
  jobs::Checkpoint checkpoint;              // all completion tokens (released: the final checkpoint)
  int32_t checkpointed = 0;                 // tokens in the saved checkpoint
  std::string error_kind, error;            // failed / retrying
};

// A job that failed with `e`: retrying when a later attempt may succeed
// (daemon/lib/failure.h), else failed; the error's kind and message.
Execution failure_of(const Error& e);
// A job that ends with `outcome` and no result (released, unservable): the
// checkpoint it holds stays as saved.
Execution ending(JobOutcome outcome, int32_t checkpointed = 0, std::string error = {});

}  // namespace ns::daemon
