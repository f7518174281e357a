// Rendering a conversation in each family, as llama.cpp's built-in renderer
// (llm_chat_apply_template in src/llama-chat.cpp) writes it: the same markers,
// spaces, newlines and trimming, so prompts match llama.cpp's byte for byte.
// Kimi K3, which has no built-in renderer there, follows its Jinja template.
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/util/error.h"

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
  return t == ChatTemplate::chatml || t == ChatTemplate::llama3 || t == ChatTemplate::kimi_k2;
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
    throw Error(ErrorKind::invalid_input,
                "messages[" + std::to_string(i) + "] has role \"" + shown + "\", which the " + template_name(t) +
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
    if (m.role == "system") out += "[SYSTEM_PROMPT]" + space + m.content + "[/SYSTEM_PROMPT]";
    else if (m.role == "user") out += "[INST]" + space + m.content + "[/INST]";
    else out += space + m.content + "</s>";
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

std::string render_deepseek2(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system") out += m.content + "\n\n";
    else if (m.role == "user") out += "User: " + m.content + "\n\n";
    else out += "Assistant: " + m.content + "<｜end▁of▁sentence｜>";
  }
  if (add_assistant) out += "Assistant:";
  return out;
}

std::string render_deepseek3(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system") out += m.content + "\n\n";
    else if (m.role == "user") out += "<｜User｜>" + m.content;
    else out += "<｜Assistant｜>" + m.content + "<｜end▁of▁sentence｜>";
  }
  if (add_assistant) out += "<｜Assistant｜>";
  return out;
}

std::string render_kimi_k2(const Messages& messages, bool add_assistant) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system") out += "<|im_system|>system<|im_middle|>";
    else if (m.role == "user") out += "<|im_user|>user<|im_middle|>";
    else if (m.role == "assistant") out += "<|im_assistant|>assistant<|im_middle|>";
    else out += "<|im_system|>tool<|im_middle|>";
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
      "2024-06\nCurrent date: " + utc_date() + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
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
    case ChatTemplate::deepseek2: return render_deepseek2(messages, add_assistant);
    case ChatTemplate::deepseek3: return render_deepseek3(messages, add_assistant);
    case ChatTemplate::kimi_k2: return render_kimi_k2(messages, add_assistant);
    case ChatTemplate::kimi_k3: return render_kimi_k3(messages, add_assistant);
    case ChatTemplate::gpt_oss: return render_gpt_oss(messages, add_assistant);
  }
  throw Error(ErrorKind::internal, "render_chat: unhandled chat template family");
}

std::string render_chat(const std::string& template_text_or_name, const std::vector<ChatMessage>& messages,
                        bool add_assistant) {
  return render_chat(require_template(template_text_or_name), messages, add_assistant);
}

}  // namespace ns::chat
