// tokenizer.chat_template from GGUF metadata, and the override that beats it.
#include "engine/chat/model_chat_template.h"

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

ChatTemplate resolve_chat_template(const std::string& override_name_or_text,
                                   const std::optional<std::string>& gguf_template) {
  if (!override_name_or_text.empty()) return require_template(override_name_or_text);
  if (!gguf_template || gguf_template->empty())
    throw Error(ErrorKind::invalid_input,
                std::string("the model's GGUF has no ") + kChatTemplateKey +
                    " (a base model?), so chat messages cannot be rendered: submit a plain prompt, or name "
                    "the family the model was trained with (" + supported_template_names() + ")");
  return require_template(*gguf_template);
}

}  // namespace ns::chat
