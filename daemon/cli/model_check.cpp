// Submit-time checks against the daemon config (contract in daemon/cli/model_check.h).
#include "daemon/cli/model_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/edit_distance.h"
#include "common/error.h"
#include "engine/chat/chat_messages_json.h"
#include "engine/chat/chat_template.h"
#include "engine/engine.h"

namespace ns::cli {
// Where a context length comes from, for a message naming the limit.
std::string ModelCheck::context_source(int64_t context, const ModelFile& facts) const {
  if (config_->engine.context <= 0) return "the model's own length";
  std::string out = "context: in " + config_->source;
  if (context < facts.context_length()) out += "; the model's own is " + std::to_string(facts.context_length());
  return out;
}

std::string close_names(const std::string& name, const std::map<std::string, std::string>& models) {
  std::string out;
  for (const auto& [known, path] : models) {
    const bool prefix = known.starts_with(name) || name.starts_with(known);
    if (edit_distance(name, known) <= 2 || prefix) out += (out.empty() ? "'" : ", '") + known + "'";
  }
  return out;
}

const ModelFile* ModelCheck::facts_of(const std::string& model, const std::string& path) {
  auto known = facts_.find(model);
  if (known == facts_.end()) {
    std::shared_ptr<ModelFile> facts;  // unreadable from here: the daemon will say
    try {
      facts = ModelFile::open(path);
    } catch (const Error&) {
    }
    known = facts_.emplace(model, std::move(facts)).first;
  }
  return known->second.get();
}

std::optional<chat::ToolCallFormat> ModelCheck::tool_format(const std::string& model) {
  if (!config_) return std::nullopt;
  const auto it = config_->models.find(model);
  if (it == config_->models.end()) return std::nullopt;
  const ModelFile* facts = facts_of(model, it->second);
  if (!facts || !facts->chat_template()) return std::nullopt;
  return chat::tool_call_format(*facts->chat_template());
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
  // A job's n choices are decoded together, so the daemon refuses n above max_batch (generation_batch.cpp).
  if (spec.sampling.n > config_->engine.max_sequences) {
    return "n = " + std::to_string(spec.sampling.n) +
           " choices, but the daemon decodes at most max_batch = " + std::to_string(config_->engine.max_sequences) +
           " sequences together (" + config_->source + "): lower n, or raise max_batch";
  }
  if (struct stat st;
      refuse_missing_files_ && ::stat(it->second.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    const std::string reason = std::strerror(errno);
    return "model '" + spec.model + "': its file " + it->second + " (models." + spec.model + " in " + config_->source +
           "): " + reason +
           ". Fix the path in the config, or mount its disk; --any-model queues it anyway (for a "
           "daemon on another machine)";
  }
  const ModelFile* facts = facts_of(spec.model, it->second);
  if (!facts) return "";
  if (spec.is_chat() && !facts->chat_template() && config_->chat_templates.count(spec.model) == 0)
    return "model '" + spec.model + "' (" + it->second +
           ") has no chat template (tokenizer.chat_template is not in its GGUF): it is a base model or a conversion "
           "without one; submit plain prompts (/v1/completions) or use an instruct model";
  const int64_t context = config_->engine.context > 0 ? config_->engine.context : facts->context_length();
  const int64_t max_tokens = spec.sampling.max_tokens;
  if (jobs::is_document_job(spec)) {  // the daemon keeps a long document's tail, in the room max_tokens leaves
    if (max_tokens < context) return "";
    return "max_tokens " + std::to_string(max_tokens) + " leaves no room for the document in the context of model '" +
           spec.model + "' (" + std::to_string(context) + " tokens, " + context_source(context, *facts) +
           "): lower --max-tokens below " + std::to_string(context);
  }
  if (!jobs::spec_problem(spec).empty()) return "";  // an oversized or invalid input is reported as such
  std::string prompt = spec.prompt;
  if (spec.is_chat()) {
    try {
      const chat::Conversation c = chat::conversation_from_json(spec.messages);
      auto& prompter = prompters_[spec.model];  // parsed once per model, not once per line of a batch
      if (!prompter) {
        const auto over = config_->chat_templates.find(spec.model);
        prompter =
            std::make_shared<const chat::ChatPrompter>(over == config_->chat_templates.end() ? "" : over->second,
                                                       facts->chat_template(), facts->bos_text(), facts->eos_text());
      }
      prompt = prompter->render(c.messages, true, c.tools);
    } catch (const Error& e) {
      // The model's template refused the conversation (its raise_exception): the job would fail the same way.
      return "model '" + spec.model + "' (" + it->second + "): " + e.what();
    }
  }
  const int64_t n = facts->count_tokens(prompt);
  if (n >= context) {
    return "model '" + spec.model + "' in " + config_->source + ": " +
           context_overflow_problem(n, context, facts->context_length());
  }
  // As OpenAI and vLLM refuse it: the daemon would stop the reply at the context's end.
  if (n + max_tokens <= context) return "";
  return "the prompt (" + std::to_string(n) + " tokens) and max_tokens (" + std::to_string(max_tokens) + ") need " +
         std::to_string(n + max_tokens) + " tokens, but the context of model '" + spec.model + "' holds " +
         std::to_string(context) + " (" + context_source(context, *facts) + "): lower max_tokens to at most " +
         std::to_string(context - n) + ", or shorten the prompt";
}

}  // namespace ns::cli
