// The daemon's worker loop: claim a job, run it on the engine, write the
// result, repeat. One job at a time; the engine for the last model used is
// kept loaded, and replaced when a job names another model.
//
// Contract:
// - A job that cannot run (model not in the config, model file missing or
//   corrupt, invalid parameters, prompt too long, ...) ends `failed` with
//   error_kind and a readable message; the worker carries on.
// - `nightshift cancel` on a running job: the worker notices within
//   cancel_poll_ms (checked from the engine's per-token progress callback),
//   stops generating and ends the job `cancelled`, keeping the partial text.
// - When `stop` becomes true (SIGINT/SIGTERM) the current generation stops at
//   the next token and the job is released back to `queued`.
// - Queue (database) errors are not the job's fault: they propagate to the
//   caller as ns::Error(database).
// Not thread-safe; `stop` may be set from a signal handler.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"
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
};

WorkerOptions worker_options_from(const Config& config);

enum class JobOutcome { none_queued, done, failed, cancelled, released };
const char* outcome_name(JobOutcome o);

class Worker {
 public:
  Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop);
  ~Worker();

  // Claims the best queued job and runs it to one of its ends.
  JobOutcome run_next();

  // Runs jobs until `stop`; with `drain`, also returns once nothing is queued.
  // Returns how many jobs it claimed.
  int run(bool drain);

  // Called on every progress step of a running job, after the worker's own
  // checks (for status reporting; tests use it to act mid-generation).
  using ProgressObserver = std::function<void(const jobs::Job&, const GenerationProgress&)>;
  void set_progress_observer(ProgressObserver observer) { observer_ = std::move(observer); }

  // The model whose engine is loaded ("" when none).
  const std::string& loaded_model() const { return engine_model_; }

 private:
  struct Execution;
  Execution execute(const jobs::Job& job);
  Engine& engine_for(const std::string& model, double& load_ms);
  void record(const jobs::Job& job, const Execution& ex, JobOutcome outcome);
  void sleep_unless_stopped(int ms) const;

  jobs::Queue& queue_;
  WorkerOptions options_;
  const std::atomic<bool>& stop_;
  ProgressObserver observer_;
  std::unique_ptr<Engine> engine_;
  std::string engine_model_;
};

}  // namespace ns::daemon
