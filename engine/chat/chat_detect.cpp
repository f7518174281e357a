// Which family a chat template belongs to, decided as llama.cpp's
// llm_chat_detect_template decides it (src/llama-chat.cpp): an exact family
// name first, then marker strings in a fixed order. The order matters (a Phi-4
// template contains <|im_start|> but is not ChatML; a Mixtral template has
// [INST] but no <<SYS>>), so the whole chain is kept, including the families
// nightshift does not render: those are named in the error instead of being
// rendered as a family that merely shares a marker.
#include <array>
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/chat/chat_template.h"
#include "common/error.h"

namespace ns::chat {
namespace {

// Every name llama.cpp accepts for --chat-template, rendered here or not.
constexpr std::array<std::string_view, 48> kLlamaCppNames = {
    "chatml",     "llama2",      "llama2-sys",        "llama2-sys-bos", "llama2-sys-strip",
    "mistral-v1", "mistral-v3",  "mistral-v3-tekken", "mistral-v7",     "mistral-v7-tekken",
    "phi3",       "phi4",        "falcon3",           "zephyr",         "monarch",
    "gemma",      "orion",       "openchat",          "vicuna",         "vicuna-orca",
    "deepseek",   "deepseek2",   "deepseek3",         "command-r",      "llama3",
    "chatglm3",   "chatglm4",    "glmedge",           "minicpm",        "exaone3",
    "exaone4",    "rwkv-world",  "granite",           "gigachat",       "megrez",
    "yandex",     "bailing",     "bailing-think",     "bailing2",       "llama4",
    "smolvlm",    "hunyuan-moe", "gpt-oss",           "hunyuan-dense",  "kimi-k2",
    "seed_oss",   "grok-2",      "pangu-embedded",
};

class Markers {
 public:
  explicit Markers(const std::string& text) : text_(text) {}
  bool has(std::string_view marker) const { return text_.find(marker) != std::string::npos; }
  bool has_all(std::initializer_list<std::string_view> markers) const {
    for (std::string_view m : markers)
      if (!has(m)) return false;
    return true;
  }
  bool starts_with(std::string_view prefix) const { return std::string_view(text_).starts_with(prefix); }

 private:
  const std::string& text_;
};

// The [INST] families: Mistral's official v1/v3/v7 templates and the Llama 2
// variants (which the older Mistral and Mixtral Instruct templates fall into).
std::string detect_inst_family(const Markers& m) {
  if (m.has("[SYSTEM_PROMPT]")) return "mistral-v7";  // v7-tekken is reachable by name only
  if (m.has("' [INST] ' + system_message") || m.has("[AVAILABLE_TOOLS]")) {
    if (m.has(" [INST]")) return "mistral-v1";
    if (m.has("\"[INST]\"")) return "mistral-v3-tekken";
    return "mistral-v3";
  }
  if (m.has("content.strip()")) return "llama2-sys-strip";
  if (m.has("bos_token + '[INST]")) return "llama2-sys-bos";
  if (m.has("<<SYS>>")) return "llama2-sys";
  return "llama2";
}

}  // namespace

std::string detect_family_name(const std::string& text) {
  for (std::string_view name : kLlamaCppNames)
    if (text == name) return std::string(name);
  if (text == template_name(ChatTemplate::kimi_k3)) return text;  // nightshift's names; see chat_template.h
  if (text == template_name(ChatTemplate::qwen35)) return text;
  if (text == template_name(ChatTemplate::glm45)) return text;

  const Markers m(text);
  if (m.has("<|im_start|>")) {
    // Qwen 3.5 (its template in the reference's models/templates/Qwen3.5-4B.jinja): llama.cpp's built-in
    // chain takes it for chatml, but its server renders the Jinja (the default), which opens a think
    // section at the generation prompt; the one departure from the chain, so that prompt is the model's.
    if (m.has_all({"<tool_response>", "<function=", "'<think>\\n'", "last_query_index"}))
      return template_name(ChatTemplate::qwen35);
    if (m.has("<|im_sep|>")) return "phi4";
    if (m.has("<end_of_utterance>")) return "smolvlm";
    return "chatml";
  }
  if (m.starts_with("mistral") || m.has("[INST]")) return detect_inst_family(m);
  if (m.has_all({"<|assistant|>", "<|end|>"})) return "phi3";
  if (m.has("[gMASK]<sop>")) {
    // GLM-4.5 / 4.6 (an empty think section before each reply) are rendered as their Jinja does (chat_render.cpp).
    if (m.has("'\\n<think></think>'")) return template_name(ChatTemplate::glm45);
    return "chatglm4";
  }
  if (m.has_all({"<|assistant|>", "<|user|>"})) return m.has("</s>") ? "falcon3" : "glmedge";
  if (m.has_all({"<|{{ item['role'] }}|>", "<|begin_of_image|>"})) return "glmedge";
  if (m.has_all({"<|user|>", "<|endoftext|>"})) return "zephyr";
  if (m.has("bos_token + message['role']")) return "monarch";
  if (m.has("<start_of_turn>")) return "gemma";
  if (m.has("'\\n\\nAssistant: ' + eos_token")) return "orion";
  if (m.has("GPT4 Correct ")) return "openchat";
  if (m.has_all({"USER: ", "ASSISTANT: "})) return m.has("SYSTEM: ") ? "vicuna-orca" : "vicuna";
  if (m.has_all({"### Instruction:", "<|EOT|>"})) return "deepseek";
  if (m.has_all({"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"})) return "command-r";
  if (m.has_all({"<|start_header_id|>", "<|end_header_id|>"})) return "llama3";
  if (m.has("[gMASK]sop")) return "chatglm3";
  if (m.has("<用户>")) return "minicpm";
  if (m.has("'Assistant: ' + message['content'] + eos_token")) return "deepseek2";
  if (m.has_all({"<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"})) return "deepseek3";
  if (m.has_all({"[|system|]", "[|assistant|]", "[|endofturn|]"})) return m.has("[|tool|]") ? "exaone4" : "exaone3";
  if (m.has("rwkv-world") || m.has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return "rwkv-world";
  if (m.has("<|start_of_role|>")) return "granite";
  if (m.has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
    return "gigachat";
  if (m.has("<|role_start|>")) return "megrez";
  if (m.has(" Ассистент:")) return "yandex";
  if (m.has_all({"<role>ASSISTANT</role>", "'HUMAN'"})) return "bailing";
  if (m.has_all({"<role>ASSISTANT</role>", "\"HUMAN\"", "<think>"})) return "bailing-think";
  if (m.has_all({"<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"})) return "bailing2";
  if (m.has_all({"<|header_start|>", "<|header_end|>"})) return "llama4";
  if (m.has("<|endofuserprompt|>")) return "dots1";
  if (m.has_all({"<|extra_0|>", "<|extra_4|>"})) return "hunyuan-moe";
  if (m.has_all({"<|start|>", "<|channel|>"})) return "gpt-oss";
  if (m.has_all({"<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"})) return "hunyuan-dense";
  if (m.has("<|im_assistant|>assistant<|im_middle|>")) return "kimi-k2";
  if (m.has("<seed:bos>")) return "seed_oss";
  if (m.has("'Assistant: '  + message['content'] + '<|separator|>")) return "grok-2";
  if (m.has("[unused9]系统：[unused10]")) return "pangu-embedded";
  // Last, so it never overrides a choice of llama.cpp's chain: the markers
  // llama.cpp's common/chat.cpp tests to send Kimi K3's template down its own path.
  if (m.has_all({"<|open|>", "<|close|>", "<|end_of_msg|>"})) return template_name(ChatTemplate::kimi_k3);
  return "";
}

std::optional<ChatTemplate> detect_template(const std::string& template_text_or_name) {
  return template_from_name(detect_family_name(template_text_or_name));
}

namespace {

// The first 80 bytes, cut at a UTF-8 character boundary, with control
// characters escaped so the message stays on one line.
std::string template_excerpt(const std::string& text) {
  constexpr size_t kMaxBytes = 80;
  size_t end = text.size();
  if (end > kMaxBytes) {
    end = kMaxBytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    const char c = text[i];
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += '?';
    else
      out += c;
  }
  if (end < text.size()) out += "...";
  return out;
}

}  // namespace

ChatTemplate require_template(const std::string& template_text_or_name) {
  const std::string family = detect_family_name(template_text_or_name);
  if (auto t = template_from_name(family)) return *t;
  if (template_text_or_name.empty())
    throw Error(ErrorKind::invalid_input, "the chat template is empty: name one of the families " +
                                              supported_template_names() + " (see docs/chat-templates.md)");
  const std::string quoted = "\"" + template_excerpt(template_text_or_name) + "\"";
  const std::string supported = "nightshift renders the chat template families " + supported_template_names() +
                                "; name one of them explicitly if the model follows it (see docs/chat-templates.md)";
  if (family.empty())
    throw Error(ErrorKind::invalid_input, "unknown chat template " + quoted +
                                              " (first 80 bytes): it matches none of the families llama.cpp "
                                              "recognises. " +
                                              supported);
  throw Error(ErrorKind::invalid_input, "chat template " + quoted + " is llama.cpp's \"" + family +
                                            "\" family, which nightshift does not render yet. " + supported);
}

}  // namespace ns::chat
