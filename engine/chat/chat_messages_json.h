// Chat messages as JSON: read from OpenAI-style request bodies, and stored in
// the queue as a plain [{"role", "content"}, ...] array.
//
// Accepted message shape (OpenAI's): {"role": "system" | "user" | "assistant" |
// "tool", "content": string | [{"type": "text", "text": string}, ...]},
// optionally "name", "tool_call_id", "reasoning_content", and an assistant's
// "tool_calls" (then content may be null), all kept for the model's template.
// Text parts are joined with "\n", as llama.cpp's server joins them. Anything
// that would change what the model reads if ignored (image parts, unknown
// fields, null content without tool calls) is rejected.
//
// Contract: errors throw ns::Error(invalid_input) whose message starts with the
// path of the offending value (e.g. "body.messages[2].content") and says what
// is allowed. Thread-safe.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"

namespace ns::chat {

// `messages` is the JSON value of a "messages" field; `where` is its path for messages.
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages, const std::string& where);

// A request's `tools` ([{"type": "function", "function": {"name", ...}}]) checked and kept as compact JSON text,
// key order as given; "" for none (null, []).
std::string parse_tools(const nlohmann::ordered_json& tools, const std::string& where);

// A conversation as stored in jobs.messages: the messages, and the tools offered ("" = none).
struct Conversation {
  std::vector<ChatMessage> messages;
  std::string tools;
};

// The stored form (jobs.messages, whose schema wants an array): a compact JSON array of messages ({"role",
// "content"} and the tool fields a message has), led by {"role": "tools", "content": "<the tools' JSON text>"}
// when tools are offered ("tools" is no role a request may give).
inline constexpr const char* kToolsRole = "tools";
std::string conversation_to_json(const std::vector<ChatMessage>& messages, const std::string& tools);
std::string chat_messages_to_json(const std::vector<ChatMessage>& messages);  // without tools
// Reads either stored form back (or any array parse_chat_messages accepts).
Conversation conversation_from_json(std::string_view json_text);
std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text);

}  // namespace ns::chat
