// Where a model's chat template comes from: the GGUF's tokenizer.chat_template,
// unless the configuration names a family for the model.
//
// Contract: read_chat_template() throws ns::Error(bad_model) if the key holds
// something other than a string; resolve_chat_template() throws
// ns::Error(invalid_input) as require_template() does, or naming the missing
// template and the fix. Thread-safe.
#pragma once

#include <optional>
#include <string>

#include "engine/chat/chat_template.h"

namespace ns::gguf {
class GgufFile;
}

namespace ns::chat {

inline constexpr const char* kChatTemplateKey = "tokenizer.chat_template";

// The GGUF's tokenizer.chat_template; nullopt when the file has none (base models).
std::optional<std::string> read_chat_template(const gguf::GgufFile& file);

// The family chat jobs for a model are rendered with: `override_name_or_text`
// when it is not empty (a family name, or a template text to detect), else the
// GGUF's template. A model without either cannot take chat jobs.
ChatTemplate resolve_chat_template(const std::string& override_name_or_text,
                                   const std::optional<std::string>& gguf_template);

}  // namespace ns::chat
