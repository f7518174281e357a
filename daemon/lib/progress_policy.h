// The progress policy: what the worker decides between a running job's
// tokens, and where a claimed job resumes. Part of the worker
// (daemon/lib/worker.h).
//
// Contract of on_progress() (called by the engine on every progress step of
// the job; false stops its generation, and the flag set on RunningJob says why):
// - `stop` set (SIGINT/SIGTERM): stopped; the step loop checkpoints the tokens
//   so far and releases the job.
// - the lease lost (RunStatus::lease_lost, set by the heartbeat, or a fenced
//   checkpoint write refused): lost; nothing more is written for the job.
// - `nightshift cancel`: the cancel flag is read every cancel_poll_ms; cancelled.
// - checkpoints every checkpoint_tokens tokens or checkpoint_interval_ms,
//   whichever comes first (one small write, never one per token); a write that
//   meets a locked database or a full disk is tried again 5 s later while
//   generation goes on. It never throws through the engine.
// Then the job's progress goes to RunStatus and to the observer.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <span>

#include "daemon/lib/job_run.h"
#include "daemon/lib/run_status.h"
#include "engine/engine.h"
#include "jobs/queue.h"

namespace ns::daemon {

// What a checkpoint holds of a generation so far: every choice's tokens and,
// with logprobs, their records (engine/sampler/logprobs.h).
jobs::Checkpoint checkpoint_of(std::span<const GenerationChoice* const> choices, bool logprobs);
// Completion tokens in a checkpoint, every choice's.
int32_t checkpoint_tokens(const jobs::Checkpoint& cp);
// Fills `request`'s resume fields from a job's checkpoint (each choice's
// tokens and, for a logprobs job, their records: the engine replays a choice
// only as far as its records go); returns the tokens it resumes from. A
// checkpoint whose logprobs cannot be read is dropped (logged): the job starts over.
int32_t resume_from(const jobs::Job& job, std::optional<jobs::Checkpoint> cp, GenerationRequest& request);

class ProgressPolicy {
 public:
  using Observer = std::function<void(const jobs::Job&, const GenerationProgress&)>;
  // `options` is the worker's, read at each call (a reloaded config applies at once).
  ProgressPolicy(jobs::Queue& queue, const WorkerOptions& options, const std::atomic<bool>& stop, RunStatus& status)
      : queue_(queue), options_(options), stop_(stop), status_(status) {}

  bool on_progress(RunningJob& run, const GenerationProgress& p);
  void set_observer(Observer observer) { observer_ = std::move(observer); }

 private:
  jobs::Queue& queue_;
  const WorkerOptions& options_;
  const std::atomic<bool>& stop_;
  RunStatus& status_;
  Observer observer_;
};

}  // namespace ns::daemon
