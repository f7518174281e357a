// tokenizer.chat_template from GGUF metadata, and the override that beats it.
#include "engine/chat/model_chat_template.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/chat/chat_messages_json.h"
#include "engine/chat/jinja.h"
#include "engine/gguf/gguf_file.h"
#include "common/error.h"

namespace ns::chat {

std::optional<std::string> read_chat_template(const gguf::GgufFile& file) {
  const gguf::Value* v = file.find(kChatTemplateKey);
  if (v == nullptr) return std::nullopt;
  if (v->type != gguf::ValueType::STRING)
    throw Error(ErrorKind::bad_model, file.path() + ": " + kChatTemplateKey + " is a " +
                                          gguf::value_type_name(v->type) +
                                          ", not a string: the file is malformed; set the model's chat "
                                          "template family in the configuration instead");
  return v->s;
}

struct ChatPrompter::Jinja {
  jinja::Template t;
};

namespace {

// A family name is one llama.cpp (or nightshift) gives a renderer; anything
// else given as an override is a Jinja template's text.
bool names_a_family(const std::string& s) { return template_from_name(s).has_value(); }

nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages) {
  return nlohmann::ordered_json::parse(conversation_to_json(messages, ""));
}

}  // namespace

ChatPrompter::ChatPrompter(const std::string& override_name_or_text, const std::optional<std::string>& gguf_template,
                           std::string bos_text, std::string eos_text)
    : bos_(std::move(bos_text)), eos_(std::move(eos_text)) {
  std::string source;
  if (!override_name_or_text.empty()) {
    if (names_a_family(override_name_or_text)) {
      family_ = require_template(override_name_or_text);
      return;
    }
    source = override_name_or_text;
  } else if (gguf_template && !gguf_template->empty()) {
    source = *gguf_template;
    from_gguf_ = true;
  } else {
    throw Error(ErrorKind::invalid_input,
                std::string("the model's GGUF has no ") + kChatTemplateKey +
                    " (a base model?), so chat messages cannot be rendered: submit a plain prompt, or set the "
                    "model's chat_template: in the configuration to a template file or a family (" +
                    supported_template_names() + ")");
  }
  try {
    jinja_ = std::make_unique<Jinja>(Jinja{jinja::Template(source)});
  } catch (const Error& e) {
    throw Error(ErrorKind::invalid_input,
                std::string(from_gguf_ ? "the GGUF's chat template" : "the chat template given") + " does not parse (" +
                    e.what() +
                    "); check it with `nightshift chat render`, or set the "
                    "model's chat_template: to a family (" +
                    supported_template_names() + ")");
  }
}

ChatPrompter::~ChatPrompter() = default;
ChatPrompter::ChatPrompter(ChatPrompter&&) noexcept = default;
ChatPrompter& ChatPrompter::operator=(ChatPrompter&&) noexcept = default;

std::string ChatPrompter::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::string& tools) const {
  if (family_) {
    const bool tool_turns =
        std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.has_tool_parts(); });
    if (!tools.empty() || tool_turns)
      throw Error(ErrorKind::invalid_input, source() +
                                                " renders text turns only: tools, tool calls and reasoning "
                                                "need the model's own Jinja template (drop the override)");
    return render_chat(*family_, messages, add_generation_prompt);
  }
  if (messages.empty()) throw Error(ErrorKind::invalid_input, "the conversation has no messages");
  nlohmann::ordered_json ctx = {{"messages", messages_json(messages)},
                                {"add_generation_prompt", add_generation_prompt},
                                {"bos_token", bos_},
                                {"eos_token", eos_}};
  if (!tools.empty()) ctx["tools"] = nlohmann::ordered_json::parse(tools);
  try {
    return jinja_->t.render(ctx);
  } catch (const Error& e) {
    throw Error(ErrorKind::invalid_input, source() + " refused the conversation: " + e.what());
  }
}

std::string ChatPrompter::source() const {
  if (family_) return std::string("family ") + template_name(*family_);
  return from_gguf_ ? "the GGUF's Jinja template" : "the Jinja template given";
}

}  // namespace ns::chat
