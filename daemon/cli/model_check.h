// What `nightshift submit --config FILE` checks against the daemon config it
// was given, so a bad night is caught in the evening: a model name that is
// not under the config's models: (a typo in the nightly timer's environment
// once failed a whole night's batch), a model file that does not exist, n
// choices above the config's max_batch, chat jobs for a model whose GGUF
// has no chat template, and a prompt plus max_tokens longer than the context
// the daemon will give the model (its `context`, 0 = the model's own length):
// the prompt is tokenized (chat messages rendered first) with the model's own
// tokenizer. Documents (jobs::is_document_job) are not refused for length:
// the daemon keeps their tail (docs/long-context.md); only a max_tokens that
// leaves them no room is.
//
// Contract: problem() is "" when the spec passes or when there is nothing to
// check against (no config, a config without models:, or a model file that
// exists but cannot be read from where submit runs: the daemon's user or
// machine may differ). The
// message names the model, the config, the close names if any, and the fix;
// `--any-model` turns the check off (a fleet whose daemons have other
// configs). A model's GGUF header is read at most once.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/lib/config.h"
#include "engine/chat/tool_calls.h"
#include "engine/engine.h"
#include "jobs/queue.h"

namespace ns::cli {

class ModelCheck {
 public:
  ModelCheck() = default;  // checks nothing
  explicit ModelCheck(const daemon::Config& config) : config_(config) {}
  // The daemon's own HTTP service: a model file missing from its config is
  // its configuration's mistake, so those jobs are queued (and held), not refused.
  struct QueueMissingFiles {};
  ModelCheck(const daemon::Config& config, QueueMissingFiles) : config_(config), refuse_missing_files_(false) {}

  std::string problem(const jobs::JobSpec& spec);
  // The tool-call markup the model's chat template writes (engine/chat/tool_calls.h); nullopt without
  // --config, for a model it lacks, or a file it cannot read.
  std::optional<chat::ToolCallFormat> tool_format(const std::string& model);

 private:
  std::optional<daemon::Config> config_;
  bool refuse_missing_files_ = true;
  // What each model's GGUF header says (read once), by model name; null: not readable from here.
  std::map<std::string, std::shared_ptr<ModelFile>> facts_;
  const ModelFile* facts_of(const std::string& model, const std::string& path);
  std::string context_source(int64_t context, const ModelFile& facts) const;
  std::map<std::string, std::shared_ptr<const chat::ChatPrompter>> prompters_;  // by model name, built on first use
};

// The configured names closest to `name` (edit distance at most 2, or a
// prefix either way), comma-separated; "" when none is close.
std::string close_names(const std::string& name, const std::map<std::string, std::string>& models);

}  // namespace ns::cli
