// Where a model's chat template comes from: the GGUF's tokenizer.chat_template,
// unless the configuration names a family for the model.
//
// Contract: read_chat_template() throws ns::Error(bad_model) if the key holds
// something other than a string. Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"

namespace ns::gguf {
class GgufFile;
}

namespace ns::chat {

inline constexpr const char* kChatTemplateKey = "tokenizer.chat_template";

// The GGUF's tokenizer.chat_template; nullopt when the file has none (base models).
std::optional<std::string> read_chat_template(const gguf::GgufFile& file);

// How a model's chat jobs become prompts. By default the GGUF's own
// tokenizer.chat_template runs in the Jinja engine (jinja.h) as transformers
// runs it, with the vocabulary's BOS and EOS texts: the text the model was
// trained on. An override (a model's `chat_template:` in the configuration)
// is a family name (chat_template.h: llama.cpp's built-in renderers) or a
// Jinja template's text.
//
// Contract: the constructor throws ns::Error(invalid_input) when there is no
// template (a base model, no override) or the Jinja source does not parse,
// naming the fix; render() throws ns::Error(invalid_input) with the
// template's own message when it raises (its raise_exception, a failing
// expression). Immutable after construction: render() is thread-safe.
class ChatPrompter {
 public:
  ChatPrompter(const std::string& override_name_or_text, const std::optional<std::string>& gguf_template,
               std::string bos_text, std::string eos_text);
  ~ChatPrompter();
  ChatPrompter(ChatPrompter&&) noexcept;
  ChatPrompter& operator=(ChatPrompter&&) noexcept;

  // The prompt for `messages` (and the `tools` offered: a JSON array's text,
  // "" = none); with add_generation_prompt it ends where the assistant's reply
  // begins. strftime_now reads the clock. A family renderer refuses tools and
  // tool turns (it would drop them).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const std::string& tools = "") const;
  // "the GGUF's Jinja template", "the Jinja template given", or "family NAME": for logs and `model info`.
  std::string source() const;

 private:
  struct Jinja;
  std::optional<ChatTemplate> family_;
  std::unique_ptr<Jinja> jinja_;
  bool from_gguf_ = false;
  std::string bos_, eos_;
};

}  // namespace ns::chat
