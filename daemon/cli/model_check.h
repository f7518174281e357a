// What `nightshift submit --config FILE` checks against the daemon config it
// was given, so a bad night is caught in the evening: a model name that is
// not under the config's models: (a typo in the nightly timer's environment
// once failed a whole night's batch), and chat jobs for a model whose GGUF
// has no chat template.
//
// Contract: problem() is "" when the spec passes or when there is nothing to
// check against (no config, a config without models:, or the model file not
// readable from where submit runs: the daemon's machine may differ). The
// message names the model, the config, the close names if any, and the fix;
// `--any-model` turns the check off (a fleet whose daemons have other
// configs). A model's GGUF header is read at most once.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "daemon/lib/config.h"
#include "jobs/queue.h"

namespace ns::cli {

class ModelCheck {
 public:
  ModelCheck() = default;  // checks nothing
  explicit ModelCheck(const daemon::Config& config) : config_(config) {}

  std::string problem(const jobs::JobSpec& spec);

 private:
  std::optional<daemon::Config> config_;
  std::map<std::string, bool> has_template_;  // model name -> its GGUF has tokenizer.chat_template
};

// The configured names closest to `name` (edit distance at most 2, or a
// prefix either way), comma-separated; "" when none is close.
std::string close_names(const std::string& name, const std::map<std::string, std::string>& models);

}  // namespace ns::cli
