// Submit-time checks against the daemon config (contract in daemon/cli/model_check.h).
#include "daemon/cli/model_check.h"

#include <algorithm>
#include <vector>

#include "engine/chat/model_chat_template.h"
#include "engine/gguf/gguf_file.h"
#include "engine/util/error.h"

namespace ns::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string close_names(const std::string& name, const std::map<std::string, std::string>& models) {
  std::string out;
  for (const auto& [known, path] : models) {
    const bool prefix = known.starts_with(name) || name.starts_with(known);
    if (edit_distance(name, known) <= 2 || prefix) out += (out.empty() ? "'" : ", '") + known + "'";
  }
  return out;
}

std::string ModelCheck::problem(const jobs::JobSpec& spec) {
  if (!config_ || config_->models.empty()) return "";
  const auto it = config_->models.find(spec.model);
  if (it == config_->models.end()) {
    std::string names;
    for (const auto& [known, path] : config_->models) names += (names.empty() ? "" : ", ") + known;
    const std::string close = close_names(spec.model, config_->models);
    return "model '" + spec.model + "' is not under models: in " + config_->source + " (" + names + ")" +
           (close.empty() ? "." : "; did you mean " + close + "?") +
           " Fix the name, or add the model to the config; --any-model queues it anyway (for a daemon with "
           "another config)";
  }
  if (!spec.is_chat()) return "";
  auto known = has_template_.find(spec.model);
  if (known == has_template_.end()) {
    bool has = true;  // unreadable from here: the daemon will say
    try {
      has = chat::read_chat_template(*gguf::GgufFile::open(it->second)).has_value();
    } catch (const Error&) {
    }
    known = has_template_.emplace(spec.model, has).first;
  }
  if (known->second) return "";
  return "model '" + spec.model + "' (" + it->second +
         ") has no chat template (tokenizer.chat_template is not in its GGUF): it is a base model or a conversion "
         "without one; submit plain prompts (/v1/completions) or use an instruct model";
}

}  // namespace ns::cli
