// The engine host: the one engine the worker has loaded and the batch open on
// it, loading another when a job names another model, and a job's prompt
// rendered with the loaded model's chat template. Part of the worker
// (daemon/lib/worker.h).
//
// Contract:
// - open() returns the batch of the engine for a model name under the options
//   given, loading the engine (and freeing the previous one first: two models
//   may not fit in memory together) unless it is loaded already. It throws
//   DaemonConfigError when this daemon's configuration cannot serve the model
//   (not under models:, a file this user may not reach, memory_budget cannot
//   load it even for one job: a budget that cannot hold max_batch contexts
//   gets the fewer its plan holds, with a warning: plan_fit in the engine,
//   one load, no retry), and ns::Error for the rest (an I/O
//   error, a missing file: transient; a corrupt model: permanent).
// - A load's time is charged to the first job that joins the batch after it
//   (take_load_ms), so a batch's sum is the loads it waited for; a load no
//   job joined after is dropped with the engine.
// - render_prompt() throws ns::Error(invalid_input) for a chat job of a model
//   without a chat template, or messages that do not render.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "daemon/lib/job_run.h"
#include "daemon/lib/run_status.h"
#include "engine/engine.h"
#include "jobs/queue.h"

namespace ns::daemon {

class EngineHost {
 public:
  explicit EngineHost(RunStatus& status) : status_(status) {}

  Engine::Batch& open(const std::string& model, const WorkerOptions& options);
  Engine::Batch* batch() { return batch_.get(); }  // null when none is open
  // The batch's state is unknown (its step failed): a new one opens at the next open().
  void close_batch() { batch_.reset(); }
  void drop();  // the batch, the engine, a load no job paid for
  // The loaded engine no longer matches `options` (its model's path or the
  // engine settings changed from `loaded_with`'s).
  bool stale(const WorkerOptions& options, const WorkerOptions& loaded_with) const;
  double take_load_ms() { return std::exchange(unpaid_load_ms_, 0.0); }
  std::string render_prompt(const jobs::Job& job) const;

  const std::string& model() const { return model_; }  // "" when none is loaded
  const std::string& path() const { return path_; }    // its file, as the config names it

 private:
  void load(const std::string& model, const std::string& path, const WorkerOptions& options);

  RunStatus& status_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Engine::Batch> batch_;  // refers to engine_'s model
  std::string model_, path_;
  // How the loaded model's chat jobs become prompts: its GGUF's template, or the config's override.
  std::shared_ptr<const chat::ChatPrompter> chat_;
  std::string chat_override_;  // the override chat_ was built from ("" = none)
  std::string chat_problem_;   // why chat_ is null, when the model has a template or an override
  double unpaid_load_ms_ = 0;  // a model load no job has been charged with yet (RunningJob::load_ms)
};

}  // namespace ns::daemon
