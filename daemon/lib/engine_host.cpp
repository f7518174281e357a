#include "daemon/lib/engine_host.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>

#include "daemon/lib/failure.h"
#include "engine/chat/chat_messages_json.h"
#include "engine/chat/chat_template.h"

namespace ns::daemon {
namespace {

// "threads 0, thread_spin_us 200, ...": the options a model loads with, named as the config names them.
std::string options_text(const EngineOptions& o) {
  std::string s;
  EngineOptions::for_each(o, [&](const auto& value, const OptionInfo& info) {
    if (info.config_key) s += (s.empty() ? "" : ", ") + std::string(info.name) + " " + option_text(value);
  });
  return s;
}

std::string known_models(const std::map<std::string, std::string>& models) {
  if (models.empty()) return "none are configured";
  std::string list;
  for (const auto& [name, path] : models) list += (list.empty() ? "" : ", ") + name;
  return "known models: " + list;
}

// A model file this daemon's user may not reach (a directory on the way it
// cannot enter) or read is a problem of the daemon's deployment, not of the
// jobs: they stay queued (DaemonConfigError) until the permissions are fixed
// and the daemon reloaded. Names the first directory it cannot enter, as
// "does not exist" would send the user looking for a missing file.
void require_reachable(const std::string& model, const std::string& path) {
  const std::string who = " (the daemon runs as uid " + std::to_string(geteuid()) + ")";
  const std::string after =
      "; fix the permissions and reload the daemon (systemctl reload nightshiftd): its jobs "
      "stay queued meanwhile";
  std::filesystem::path dir;
  for (const auto& part : std::filesystem::path(path).parent_path()) {
    dir /= part;
    if (::access(dir.c_str(), X_OK) != 0 && (errno == EACCES || errno == EPERM)) {
      throw DaemonConfigError(ErrorKind::io, "model '" + model + "': cannot enter directory " + dir.string() +
                                                 " on the way to " + path + ": " + std::strerror(errno) + who + after);
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const int err = errno;
  if (err == EACCES || err == EPERM) {
    throw DaemonConfigError(ErrorKind::io,
                            "model '" + model + "': cannot read " + path + ": " + std::strerror(err) + who + after);
  }
}

}  // namespace

Engine::Batch& EngineHost::open(const std::string& model, const WorkerOptions& options) {
  auto it = options.models.find(model);
  if (it == options.models.end()) {
    throw DaemonConfigError(
        ErrorKind::invalid_input,
        "model '" + model + "' is not in the daemon's config (" + known_models(options.models) +
            "); add it under models: in " +
            (options.config_source.empty() ? std::string("the config") : options.config_source) +
            " and reload (SIGHUP); if the name is wrong, `nightshift retry --batch B --model RIGHT` "
            "moves them (docs/operations.md, \"A bad night\")");
  }
  const std::string& path = it->second;
  if (!engine_ || model_ != model || path_ != path) {
    require_reachable(model, path);
    load(model, path, options);
    chat_.reset();
  }
  // The chat template: the GGUF's, or the config's override (a reload may change it without reloading the model).
  const auto over = options.chat_templates.find(model);
  const std::string& want = over == options.chat_templates.end() ? std::string() : over->second;
  if (!chat_ || want != chat_override_) {
    const ModelSummary& s = engine_->summary();
    chat_override_ = want;
    chat_problem_ = s.chat_template_problem;
    chat_ = want.empty() ? s.chat : nullptr;
    if (!want.empty()) {
      try {
        chat_ = std::make_shared<const chat::ChatPrompter>(want, s.chat_template, s.bos_text, s.eos_text);
        spdlog::info("model {}: chat jobs rendered with {} (models.{}.chat_template)", model, chat_->source(), model);
      } catch (const Error& e) {
        chat_problem_ = e.what();
        spdlog::warn("model {}: its chat_template override cannot be used ({}); chat jobs for it will fail", model,
                     chat_problem_);
      }
    }
  }
  if (!batch_) batch_ = engine_->open_batch();
  return *batch_;
}

void EngineHost::load(const std::string& model, const std::string& path, const WorkerOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    // The daemon's configuration (a typo in the path) or its machine (a disk mounted late), never the jobs':
    // they stay queued, as for a name typo, and the model is tried again after the block.
    throw DaemonConfigError(ErrorKind::io, "model '" + model + "': file " + path +
                                               " does not exist or is not a regular file; its jobs stay queued: fix "
                                               "models." +
                                               model +
                                               " in the config and reload the daemon, or mount "
                                               "the disk");
  }

  // Free the previous model first: two models may not fit in memory together.
  drop();
  spdlog::info("loading model {} from {} (batches of up to {} jobs; {})", model, path, options.engine.max_sequences,
               options_text(options.engine));
  const auto t0 = std::chrono::steady_clock::now();
  EngineOptions eo = options.engine;
  // The KV cache grows with the batch: a budget that cannot hold max_batch
  // contexts may hold fewer (the engine's plan, plan_fit), rather than fail the jobs.
  eo.fewer_sequences = true;
  try {
    try {
      engine_ = Engine::load(path, eo);
    } catch (const IncompleteFileError& e) {
      throw DaemonConfigError(ErrorKind::io, "model '" + model + "': " + e.what() + "; its jobs stay queued and " +
                                                 "the file is tried again later (a copy still in progress, or a " +
                                                 "cut-off download: finish or redo it)");
    } catch (const std::bad_alloc&) {
      // The engine names its sizes (Model::load); an allocation outside
      // them still is this configuration against this machine.
      throw Error(ErrorKind::invalid_input, "out of memory while loading it with a context of " +
                                                std::to_string(eo.context) + " (0: the model's own length) and " +
                                                std::to_string(eo.max_sequences) +
                                                " sequence(s); lower `context` "
                                                "or `max_batch`, or give the daemon more memory");
    }
  } catch (const Error& e) {
    // Loading sees no job: an invalid_input here is the engine settings
    // (memory_budget, io_mode, context) against this model, even one sequence
    // not fitting: its jobs stay queued.
    if (e.kind() != ErrorKind::invalid_input) throw;
    throw DaemonConfigError(ErrorKind::invalid_input,
                            "this daemon's configuration cannot load model '" + model + "': " + e.what());
  }
  if (const ModelSummary& s = engine_->summary(); s.sequences < eo.max_sequences)
    spdlog::warn("model {}: a batch of {} jobs does not fit ({}); using {}", model, eo.max_sequences,
                 s.fewer_sequences_reason, s.sequences);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  unpaid_load_ms_ += load_ms;
  if (const std::string& problem = engine_->summary().chat_template_problem; !problem.empty())
    spdlog::warn("model {}: its chat template cannot be read ({}); chat jobs for it will fail", model, problem);
  model_ = model;
  path_ = path;
  status_.set_loaded_model(model);
  status_.touch();
  spdlog::info("model {} loaded in {:.0f} ms", model, load_ms);
}

void EngineHost::drop() {
  batch_.reset();  // refers to the engine's model
  chat_.reset();
  unpaid_load_ms_ = 0;  // that load served no job
  engine_.reset();
  model_.clear();
  path_.clear();
  status_.set_loaded_model("");
}

bool EngineHost::stale(const WorkerOptions& options, const WorkerOptions& loaded_with) const {
  if (!engine_) return false;
  const auto it = options.models.find(model_);
  // Every engine option, a new one included (EngineOptions::operator==).
  return it == options.models.end() || it->second != path_ || options.engine != loaded_with.engine;
}

std::string EngineHost::render_prompt(const jobs::Job& job) const {
  if (!job.spec.is_chat()) return job.spec.prompt;
  if (!chat_) {
    if (!chat_problem_.empty())
      throw Error(ErrorKind::invalid_input, "model '" + job.spec.model + "': " + chat_problem_);
    throw Error(ErrorKind::invalid_input,
                "model '" + job.spec.model +
                    "' has no chat template (tokenizer.chat_template is not in its GGUF): "
                    "it is a base model or a conversion without one; submit the job as a plain prompt "
                    "(/v1/completions) or use an instruct model");
  }
  const chat::Conversation c = chat::conversation_from_json(job.spec.messages);
  return chat_->render(c.messages, /*add_generation_prompt=*/true, c.tools);
}

}  // namespace ns::daemon
