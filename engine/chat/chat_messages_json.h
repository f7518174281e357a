// Chat messages as JSON: read from OpenAI-style request bodies, and stored in
// the queue as a plain [{"role", "content"}, ...] array.
//
// Accepted message shape (OpenAI's): {"role": "system" | "user" | "assistant" |
// "tool", "content": string | [{"type": "text", "text": string}, ...]},
// optionally "name" and "tool_call_id" (ignored: no family renders them).
// Text parts are joined with "\n", as llama.cpp's server joins them. Anything
// that would change what the model reads if ignored (image parts, tool_calls,
// unknown fields, null content) is rejected.
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

// The stored form: a compact JSON array of {"role", "content"} objects.
std::string chat_messages_to_json(const std::vector<ChatMessage>& messages);
// Reads the stored form back (or any array parse_chat_messages accepts).
std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text);

}  // namespace ns::chat
