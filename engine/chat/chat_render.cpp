// Rendering a conversation in each family, as llama.cpp's built-in renderer
// (llm_chat_apply_template in src/llama-chat.cpp) writes it: the same markers,
// spaces, newlines and trimming, so prompts match llama.cpp's byte for byte.
// Kimi K3, GLM-4.5 and gpt-oss, which have no (faithful) built-in renderer
// there (llama.cpp's "chatglm4" is not GLM-4.5's format; its gpt-oss one
// leaves out the system preamble), follow their Jinja templates.
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "common/error.h"

namespace ns::chat {
namespace {

using Messages = std::vector<ChatMessage>;

// Whitespace as C's isspace() sees it in the "C" locale, which llama.cpp's trim uses.
bool is_c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end && is_c_space(s[begin])) ++begin;
  while (end > begin && is_c_space(s[end - 1])) --end;
  return std::string(s.substr(begin, end - begin));
}

bool renders_tool_role(ChatTemplate t) {
  // These put the role's name in the turn header; the others have no place for it.
  // glm-4.5 renders tool results as <|observation|> turns.
  return t == ChatTemplate::chatml || t == ChatTemplate::llama3 || t == ChatTemplate::kimi_k2 ||
         t == ChatTemplate::qwen35 || t == ChatTemplate::glm45;
}

void check_messages(ChatTemplate t, const Messages& messages) {
  if (messages.empty())
    throw Error(ErrorKind::invalid_input,
                "the conversation has no messages: give at least one {\"role\", \"content\"} message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system" || role == "user" || role == "assistant") continue;
    if (role == "tool" && renders_tool_role(t)) continue;
    const std::string shown = role.size() > 40 ? role.substr(0, 40) + "..." : role;
    throw Error(ErrorKind::invalid_input, "messages[" + std::to_string(i) + "] has role \"" + shown + "\", which the " +
                                              template_name(t) +
                                              " chat template cannot render: use system, user or assistant" +
                                              (renders_tool_role(t) ? " (or tool)" : ""));
  }
}

std::string render_chatml(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_assistant) out += "<|im_start|>assistant\n";
  return out;
}

// Mistral v7: system and user in their own brackets; the assistant reply ends with </s>.
std::string render_mistral_v7(const Messages& messages, bool tekken) {
  const std::string space = tekken ? "" : " ";
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system")
      out += "[SYSTEM_PROMPT]" + space + m.content + "[/SYSTEM_PROMPT]";
    else if (m.role == "user")
      out += "[INST]" + space + m.content + "[/INST]";
    else
      out += space + m.content + "</s>";
  }
  return out;
}

// Mistral v1 / v3 / v3-tekken: a system message opens the [INST] turn that the
// next user message closes. v1 has a space before [INST] and [/INST]; tekken
// none after [INST] or before a reply; v3 alone trims the assistant's replies.
std::string render_mistral_v1_v3(const Messages& messages, ChatTemplate t) {
  const std::string leading = t == ChatTemplate::mistral_v1 ? " " : "";
  const std::string trailing = t == ChatTemplate::mistral_v3_tekken ? "" : " ";
  const bool trim_assistant = t == ChatTemplate::mistral_v3;
  std::string out;
  bool inside_turn = false;
  for (const auto& m : messages) {
    if (!inside_turn) {
      out += leading + "[INST]" + trailing;
      inside_turn = true;
    }
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + leading + "[/INST]";
    } else {
      out += trailing + (trim_assistant ? trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

// Llama 2 and its variants. The first [INST] is written before the loop (the
// BOS before it is the tokenizer's); later turns open with [INST] again,
// preceded by <s> in the -bos variant.
std::string render_llama2(const Messages& messages, ChatTemplate t) {
  const bool system_block = t != ChatTemplate::llama2;
  const bool bos_inside = t == ChatTemplate::llama2_sys_bos;
  const bool strip = t == ChatTemplate::llama2_sys_strip;
  std::string out = "[INST] ";
  bool inside_turn = true;
  for (const auto& m : messages) {
    const std::string content = strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      out += bos_inside ? "<s>[INST] " : "[INST] ";
      inside_turn = true;
    }
    if (m.role == "system") {
      // Without <<SYS>> the system text still leads the first user message.
      out += system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
    } else if (m.role == "user") {
      out += content + " [/INST]";
    } else {
      out += content + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

std::string render_llama3(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  if (add_assistant) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// DeepSeek V2's and V3's templates: the system text then a blank line, each
// user turn after its marker (V2 also ends it with a blank line), each
// assistant turn after its marker and ended by <｜end▁of▁sentence｜>; the
// generation prompt is the assistant marker (V2's without its space).
struct DeepseekMarkers {
  const char* user;
  const char* user_end;
  const char* assistant;
  const char* generation_prompt;
};
constexpr DeepseekMarkers kDeepseek2{"User: ", "\n\n", "Assistant: ", "Assistant:"};
constexpr DeepseekMarkers kDeepseek3{"<｜User｜>", "", "<｜Assistant｜>", "<｜Assistant｜>"};

std::string render_deepseek(const Messages& messages, bool add_assistant, const DeepseekMarkers& k) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system")
      out += m.content + "\n\n";
    else if (m.role == "user")
      out += k.user + m.content + k.user_end;
    else
      out += k.assistant + m.content + "<｜end▁of▁sentence｜>";
  }
  if (add_assistant) out += k.generation_prompt;
  return out;
}

std::string render_kimi_k2(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system")
      out += "<|im_system|>system<|im_middle|>";
    else if (m.role == "user")
      out += "<|im_user|>user<|im_middle|>";
    else if (m.role == "assistant")
      out += "<|im_assistant|>assistant<|im_middle|>";
    else
      out += "<|im_system|>tool<|im_middle|>";
    out += m.content + "<|im_end|>";
  }
  if (add_assistant) out += "<|im_assistant|>assistant<|im_middle|>";
  return out;
}

// Kimi K3 has no built-in renderer in llama.cpp (its server runs the Jinja), so
// this writes what the model's own template (the reference's
// models/templates/Kimi-K3.jinja) gives for text messages with the template's
// defaults, thinking=true and thinking_effort='max', which llama.cpp's server
// leaves in place (it passes enable_thinking, a variable this template does not
// read). Each message is <|open|>message role="..."<|sep|>...<|close|>message<|sep|>
// then <|end_of_msg|>, the turn end the GGUF names as EOS. With thinking on, the
// template starts with a system message naming the effort, writes each assistant
// reply after a think section (empty here: a ChatMessage carries no reasoning),
// and the generation prompt opens the think section. Content goes in as given,
// untrimmed and unescaped (the template escapes attribute values only).
// Checked against that template's output: tests/unit/chat/kimi_k3_vectors.json.
std::string kimi_k3_message(std::string_view attributes, std::string_view body) {
  return "<|open|>message " + std::string(attributes) + "<|sep|>" + std::string(body) +
         "<|close|>message<|sep|><|end_of_msg|>";
}

std::string render_kimi_k3(const Messages& messages, bool add_assistant) {
  std::string out = kimi_k3_message(
      "role=\"system\" type=\"thinking-effort\"",
      "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
      "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
      "`thinking_effort=max`.");
  for (const auto& m : messages) {
    if (m.role == "assistant")
      out += kimi_k3_message("role=\"assistant\"", "<|open|>think<|sep|><|close|>think<|sep|><|open|>response<|sep|>" +
                                                       m.content + "<|close|>response<|sep|>");
    else
      out += kimi_k3_message("role=\"" + m.role + "\"", m.content);  // system or user
  }
  if (add_assistant) out += "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
  return out;
}

// Qwen 3.5 (the reference's models/templates/Qwen3.5-4B.jinja) for text
// messages, no tools declared, with the template's defaults (thinking on),
// as llama.cpp's server renders it:
// - a system message must come first; its content is trimmed;
// - the last user query is the last user message that is not only a
//   <tool_response> block (there must be one);
// - user: <|im_start|>user\n{trimmed}<|im_end|>\n;
// - assistant: a "<think>...</think>" in its content is taken out as its
//   reasoning; after the last user query the reply is written as
//   "<think>\n{reasoning}\n</think>\n\n{reply}", before it the reply alone;
// - tool: consecutive tool results share one user turn, each as
//   "\n<tool_response>\n{trimmed}\n</tool_response>";
// - the generation prompt opens the think section: <|im_start|>assistant\n<think>\n.
// Checked against the template's output: tests/unit/chat/qwen35_vectors.json.
// (Jinja's trim strips Unicode whitespace; this strips C whitespace.)
std::string render_qwen35(const Messages& messages, bool add_assistant) {
  const std::string_view tool_open = "<tool_response>", tool_close = "</tool_response>";
  int64_t last_query = -1;
  for (int64_t i = static_cast<int64_t>(messages.size()) - 1; i >= 0 && last_query < 0; --i) {
    const ChatMessage& m = messages[static_cast<size_t>(i)];
    if (m.role != "user") continue;
    const std::string c = trim(m.content);
    if (!(c.starts_with(tool_open) && c.ends_with(tool_close))) last_query = i;
  }
  if (last_query < 0)
    throw Error(ErrorKind::invalid_input,
                "the qwen3.5 chat template needs a user message that is not only a <tool_response>: add one");
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = trim(m.content);
    if (m.role == "system") {
      if (i != 0)
        throw Error(ErrorKind::invalid_input, "messages[" + std::to_string(i) +
                                                  "] is a system message: the qwen3.5 chat template takes one, first");
      out += "<|im_start|>system\n" + content + "<|im_end|>\n";
    } else if (m.role == "user") {
      out += "<|im_start|>user\n" + content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string reasoning;
      if (const size_t close = content.find("</think>"); close != std::string::npos) {
        std::string before = content.substr(0, close);
        while (!before.empty() && before.back() == '\n') before.pop_back();
        if (const size_t open = before.rfind("<think>"); open != std::string::npos) before = before.substr(open + 7);
        reasoning = trim(before);
        std::string after = content.substr(content.rfind("</think>") + 8);
        size_t lead = 0;
        while (lead < after.size() && after[lead] == '\n') ++lead;
        content = after.substr(lead);
      }
      if (static_cast<int64_t>(i) > last_query)
        out += "<|im_start|>assistant\n<think>\n" + reasoning + "\n</think>\n\n" + content;
      else
        out += "<|im_start|>assistant\n" + content;
      out += "<|im_end|>\n";
    } else {  // tool
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_assistant) out += "<|im_start|>assistant\n<think>\n";
  return out;
}

// The length of the whitespace code point (Python's str.isspace: ASCII
// whitespace, U+001C-U+001F, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000) that starts at s[i], or 0.
size_t py_space_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (is_c_space(s[i]) || (b(0) >= 0x1c && b(0) <= 0x1f)) return 1;
  if (b(0) == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (b(0) == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;  // U+1680
  if (b(0) == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf)) return 3;
  if (b(0) == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;  // U+205F
  if (b(0) == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

// Python's str.strip() on UTF-8 text.
std::string py_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const size_t n = py_space_at(s, begin);
    if (n == 0) break;
    begin += n;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // the last code point: back over continuation bytes
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (py_space_at(s.substr(0, end), start) != end - start) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

std::string_view strip_newlines(std::string_view s, bool left) {
  if (left)
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  else
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// GLM-4.5 and 4.6 follow their Jinja template (the reference's
// models/templates/GLM-4.6.jinja; llama.cpp's built-in "chatglm4" renderer
// writes "<|assistant|>\n" and no think sections, which is not what these
// models were trained on), for text messages and no tools, with thinking on
// (enable_thinking true, llama.cpp's server default): [gMASK]<sop> (GLM's
// GGUFs add no BOS of their own), then <|system|>\n, <|user|>\n followed by
// the content as given; an assistant reply is <|assistant|>, a think section
// (empty, or the reply's own <think>...</think> part when it comes after the
// last user message) and the rest of the reply stripped; tool results are
// <|observation|> turns. The generation prompt is <|assistant|>: the model
// then opens its think section. Checked against that template's output:
// tests/unit/chat/glm45_vectors.json.
std::string render_glm45(const Messages& messages, bool add_assistant) {
  size_t last_user = messages.size();  // none
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = i;
  std::string out = "[gMASK]<sop>";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      out += "<|user|>\n" + m.content;
    } else if (m.role == "system") {
      out += "<|system|>\n" + m.content;
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|observation|>";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
    } else {  // assistant: "<think>reasoning</think>answer" splits as the template splits it
      std::string_view content = m.content, reasoning;
      const size_t close = content.find("</think>");
      if (close != std::string_view::npos) {
        reasoning = strip_newlines(content.substr(0, close), false);
        const size_t open = reasoning.rfind("<think>");
        if (open != std::string_view::npos) reasoning.remove_prefix(open + 7);
        reasoning = strip_newlines(reasoning, true);
        content = strip_newlines(content.substr(content.rfind("</think>") + 8), true);
      }
      const bool after_last_user = last_user == messages.size() || i > last_user;
      out += "<|assistant|>\n<think>" + (after_last_user ? py_strip(reasoning) : std::string()) + "</think>";
      const std::string answer = py_strip(content);
      if (!answer.empty()) out += "\n" + answer;
    }
  }
  if (add_assistant) out += "<|assistant|>";
  return out;
}

// gpt-oss: what its own template (the reference's
// models/templates/openai-gpt-oss-120b.jinja, the GGUF's chat_template) gives
// for text messages with its defaults, which llama.cpp's server leaves in
// place: a system message naming the identity, the knowledge cutoff, today's
// date, "Reasoning: medium" and the valid channels; a first system message
// becomes the developer message's "# Instructions" (none when it is empty);
// user turns as they are; earlier assistant replies in the final channel
// ending <|end|>, a closing one (no generation prompt) ending <|return|>; the
// generation prompt "<|start|>assistant", after which the model picks its
// channel. Today's date is the UTC date (the template calls strftime_now,
// which is local time in llama.cpp's server). Checked against that template's
// output: tests/unit/chat/gpt_oss_vectors.json.
// Two refusals where the template would go wrong silently or loudly: a system
// message after the first (the template drops it) and an assistant reply that
// carries channel markers (the template raises).
std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string render_gpt_oss(const Messages& messages, bool add_assistant) {
  std::string out =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
      "2024-06\nCurrent date: " +
      utc_date() +
      "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
      "final. Channel must be included for every message.<|end|>";
  size_t first = 0;
  if (messages[0].role == "system") {
    if (!messages[0].content.empty())
      out += "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "\n\n<|end|>";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (m.role == "system")
      throw Error(ErrorKind::invalid_input, at + " is a system message after the first: gpt-oss's chat template "
                                                 "renders only a leading one (it would drop this); merge it into "
                                                 "messages[0] or send it as a user message");
    if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
      continue;
    }
    if (m.content.find("<|channel|>analysis<|message|>") != std::string::npos ||
        m.content.find("<|channel|>final<|message|>") != std::string::npos)
      throw Error(ErrorKind::invalid_input, at + " is an assistant reply with <|channel|> markers: give only the "
                                                 "final channel's text (gpt-oss's chat template refuses them)");
    const bool closing = i + 1 == messages.size() && !add_assistant;
    out += "<|start|>assistant<|channel|>final<|message|>" + m.content + (closing ? "<|return|>" : "<|end|>");
  }
  if (add_assistant) out += "<|start|>assistant";
  return out;
}

}  // namespace

std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_assistant) {
  check_messages(t, messages);
  switch (t) {
    case ChatTemplate::chatml: return render_chatml(messages, add_assistant);
    case ChatTemplate::llama2:
    case ChatTemplate::llama2_sys:
    case ChatTemplate::llama2_sys_bos:
    case ChatTemplate::llama2_sys_strip: return render_llama2(messages, t);
    case ChatTemplate::mistral_v1:
    case ChatTemplate::mistral_v3:
    case ChatTemplate::mistral_v3_tekken: return render_mistral_v1_v3(messages, t);
    case ChatTemplate::mistral_v7: return render_mistral_v7(messages, false);
    case ChatTemplate::mistral_v7_tekken: return render_mistral_v7(messages, true);
    case ChatTemplate::llama3: return render_llama3(messages, add_assistant);
    case ChatTemplate::deepseek2: return render_deepseek(messages, add_assistant, kDeepseek2);
    case ChatTemplate::deepseek3: return render_deepseek(messages, add_assistant, kDeepseek3);
    case ChatTemplate::kimi_k2: return render_kimi_k2(messages, add_assistant);
    case ChatTemplate::kimi_k3: return render_kimi_k3(messages, add_assistant);
    case ChatTemplate::qwen35: return render_qwen35(messages, add_assistant);
    case ChatTemplate::glm45: return render_glm45(messages, add_assistant);
    case ChatTemplate::gpt_oss: return render_gpt_oss(messages, add_assistant);
  }
  throw Error(ErrorKind::internal, "render_chat: unhandled chat template family");
}

std::string render_chat(const std::string& template_text_or_name, const std::vector<ChatMessage>& messages,
                        bool add_assistant) {
  return render_chat(require_template(template_text_or_name), messages, add_assistant);
}

}  // namespace ns::chat
