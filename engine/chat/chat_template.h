// Chat templates: a conversation (a list of {role, content} messages) rendered
// into the prompt text a chat model was trained on.
//
// The family is detected from a GGUF's `tokenizer.chat_template` (Jinja text)
// the way llama.cpp's llm_chat_detect_template does: by marker strings, tested
// in the same order, so a template is never taken for a family llama.cpp would
// not choose. A family can also be named explicitly, with llama.cpp's names
// ("chatml", "llama3", "kimi-k2", ...): a name is always accepted where a
// template text is. Rendering reproduces llama.cpp's built-in (non-Jinja)
// renderer, llm_chat_apply_template, byte for byte; docs/chat-templates.md
// lists where that differs from the models' own Jinja templates. kimi-k3,
// which that renderer lacks, and gpt-oss, whose built-in form leaves out the
// system preamble and channels the model was trained with, reproduce the
// model's Jinja template instead.
//
// Contract:
// - Pure functions, thread-safe.
// - The rendered text holds no BOS token (the tokenizer adds it as the GGUF
//   says) and must be tokenized with special-token parsing on, so markers such
//   as <|im_start|> become their control tokens.
// - Errors throw ns::Error(invalid_input) with a message that names the
//   template (its first 80 bytes) or the message at fault and what to do.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ns::chat {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (and "tool" where the family has it)
  std::string content;
  // What OpenAI's messages carry besides text, for the model's own Jinja
  // template (the family renderers refuse a turn that has any of them):
  std::string tool_calls;          // an assistant turn's calls: a JSON array [{id, type, function: {name,
                                   // arguments (an object)}}] ("" = none)
  std::string tool_call_id, name;  // a tool result: the call it answers, the function's name
  std::string reasoning_content;   // an assistant turn's reasoning (templates that render it)
  bool has_tool_parts() const {
    return !tool_calls.empty() || !tool_call_id.empty() || !name.empty() || !reasoning_content.empty();
  }
};

// The families nightshift renders. Each has the name llama.cpp gives it, but
// for kimi-k3 and glm-4.5, which llama.cpp's built-in list lacks (its server
// renders their Jinja itself).
enum class ChatTemplate {
  chatml,             // "chatml": <|im_start|>role\n...<|im_end|>\n (Qwen 1.5-3, Yi, OpenHermes, ...)
  llama2,             // "llama2": [INST] ... [/INST], system folded into the first turn
                      //   (Llama 2 without <<SYS>>, Mistral / Mixtral Instruct v0.1-v0.2)
  llama2_sys,         // "llama2-sys": as llama2 with a <<SYS>> block (Llama 2 chat)
  llama2_sys_bos,     // "llama2-sys-bos": as llama2-sys with <s> before each later [INST]
  llama2_sys_strip,   // "llama2-sys-strip": as llama2-sys with every message trimmed
  mistral_v1,         // "mistral-v1": " [INST] ... [/INST]" (Mistral's official v1)
  mistral_v3,         // "mistral-v3": "[INST] ...[/INST]" (Mistral Large 2407, Mixtral 8x22B)
  mistral_v3_tekken,  // "mistral-v3-tekken": no spaces (Mistral Nemo)
  mistral_v7,         // "mistral-v7": [SYSTEM_PROMPT] ... (Mistral Large 2411)
  mistral_v7_tekken,  // "mistral-v7-tekken": v7 without spaces (Mistral Small 3.x); by name only
  llama3,             // "llama3": <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama 3.x)
  deepseek2,          // "deepseek2": User: ...\n\nAssistant: ... (DeepSeek V2, V2.5 chat)
  deepseek3,          // "deepseek3": <｜User｜>...<｜Assistant｜>... (DeepSeek V3, R1)
  kimi_k2,            // "kimi-k2": <|im_user|>user<|im_middle|>...<|im_end|> (Kimi K2)
  kimi_k3,            // "kimi-k3": <|open|>message role="user"<|sep|>...<|close|>message<|sep|><|end_of_msg|>
                      //   (Kimi K3; llama.cpp renders it through its Jinja path only, see chat_render.cpp)
  qwen35,             // "qwen3.5": ChatML with Qwen 3.5's thinking: the generation prompt opens <think>\n, replies
                      //   after the last user query carry a <think>...</think> section, tool results go in
                      //   <tool_response> blocks of a user turn (Qwen 3.5; llama.cpp's built-in chain says
                      //   chatml, its server renders the Jinja: see chat_render.cpp)
  glm45,              // "glm-4.5": [gMASK]<sop><|user|>\n...<|assistant|>\n<think></think>\n... (GLM-4.5, 4.6:
                      //   their Jinja template; llama.cpp's built-in "chatglm4" writes these markers differently)
  gpt_oss,            // "gpt-oss": OpenAI's harmony format, <|start|>role<|message|>...<|end|>, as gpt-oss's
                      //   own Jinja template renders it (not llama.cpp's simpler built-in, see chat_render.cpp)
};

// llama.cpp's name for a family.
const char* template_name(ChatTemplate t);
// Every family nightshift renders, in the order of the enum.
const std::vector<ChatTemplate>& supported_templates();
// "chatml, llama2, ..., kimi-k2": for error messages and --help.
std::string supported_template_names();
// The family with that llama.cpp name, if nightshift renders it.
std::optional<ChatTemplate> template_from_name(std::string_view name);

// llama.cpp's name for the family of `template_text` (a Jinja template, or a
// family name), as llm_chat_detect_template would choose it, including the
// families nightshift does not render ("phi3", "gemma", ...). "" if llama.cpp
// would not recognise it either. Additions: a template llama.cpp's chain
// leaves unrecognised but that has Kimi K3's markers is "kimi-k3"; a ChatML
// template with Qwen 3.5's thinking and tool-call markers is "qwen3.5"
// (llama.cpp's chain says "chatml"); GLM-4.5 and 4.6's template (llama.cpp's
// "chatglm4" markers plus their empty think section) is "glm-4.5".
std::string detect_family_name(const std::string& template_text);

// The family of `template_text_or_name`, if nightshift renders it.
std::optional<ChatTemplate> detect_template(const std::string& template_text_or_name);

// As detect_template, but throws ns::Error(invalid_input) when the template is
// unknown, or is a family llama.cpp knows and nightshift does not render; the
// message quotes the first 80 bytes and lists the supported names.
ChatTemplate require_template(const std::string& template_text_or_name);

// The prompt for `messages` in family `t`. With add_assistant the text ends
// with the opening of an assistant turn, so the model writes the reply (the
// llama2 and mistral families end with [/INST] anyway and ignore it).
// Throws ns::Error(invalid_input) for an empty conversation or a role the
// family cannot render: every family has system, user and assistant; "tool"
// only chatml, llama3 and kimi-k2 (llama.cpp would drop it or render it as
// an assistant turn elsewhere, which changes what the model reads).
std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_assistant);

// require_template() then render_chat().
std::string render_chat(const std::string& template_text_or_name, const std::vector<ChatMessage>& messages,
                        bool add_assistant);

}  // namespace ns::chat
