// OpenAI-style messages <-> ChatMessage. Strict on purpose: a batch runs
// unattended overnight, so a field we would silently drop is reported at
// submit time instead of producing an answer to a different question.
#include "engine/chat/chat_messages_json.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ns::chat {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::invalid_input, where + " " + what);
}

// "an object", "a string", ...: for messages such as "content is a number".
std::string a_type(const json& v) {
  const std::string name = v.type_name();
  if (v.is_null()) return "null";
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

std::string parse_role(const json& message, const std::string& where) {
  const auto it = message.find("role");
  if (it == message.end()) fail(where, "has no \"role\": give one of system, user, assistant, tool");
  if (!it->is_string()) fail(where + ".role", "is " + a_type(*it) + ", not a string");
  const std::string role = it->get<std::string>();
  if (role == "system" || role == "user" || role == "assistant" || role == "tool") return role;
  if (role == "developer")
    fail(where + ".role", "is \"developer\": use \"system\" (nightshift's models have no developer role)");
  fail(where + ".role", "is \"" + role.substr(0, 40) + "\": use one of system, user, assistant, tool");
}

std::string parse_content(const json& message, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end()) fail(where, "has no \"content\"");
  const std::string path = where + ".content";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null()) fail(path, "is null: every message needs text (tool calls are not supported)");
  if (!it->is_array())
    fail(path, "is " + a_type(*it) + ": give a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string part_path = path + "[" + std::to_string(i) + "]";
    if (!part.is_object()) fail(part_path, "is not an object: give {\"type\": \"text\", \"text\": \"...\"}");
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      fail(part_path, "has no string \"type\": give {\"type\": \"text\", \"text\": \"...\"}");
    if (*type != "text")
      fail(part_path, "is of type \"" + type->get<std::string>() +
                          "\": only text parts are supported (nightshift runs text-only models)");
    const auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) fail(part_path, "has no string \"text\"");
    // Joined as llama.cpp joins content parts: a newline between non-empty pieces.
    if (!text.empty()) text += "\n";
    text += part_text->get<std::string>();
  }
  return text;
}

void check_other_fields(const json& message, const std::string& where) {
  for (const auto& [key, value] : message.items()) {
    if (key == "role" || key == "content" || key == "name" || key == "tool_call_id") continue;
    if ((key == "tool_calls" || key == "function_call") && (value.is_null() || (value.is_array() && value.empty())))
      continue;
    if (key == "tool_calls" || key == "function_call")
      fail(where + "." + key, "is not supported: nightshift renders text turns only");
    fail(where, "has an unknown field \"" + key + "\": a message has role, content and optionally name");
  }
}

}  // namespace

std::vector<ChatMessage> parse_chat_messages(const json& messages, const std::string& where) {
  if (!messages.is_array()) fail(where, "is " + a_type(messages) + ", not an array of messages");
  if (messages.empty()) fail(where, "is empty: give at least one {\"role\", \"content\"} message");
  std::vector<ChatMessage> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string path = where + "[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object()) fail(path, "is " + a_type(m) + ", not an object");
    ChatMessage msg;
    msg.role = parse_role(m, path);
    msg.content = parse_content(m, path);
    check_other_fields(m, path);
    out.push_back(std::move(msg));
  }
  return out;
}

std::string chat_messages_to_json(const std::vector<ChatMessage>& messages) {
  json array = json::array();
  for (const auto& m : messages) array.push_back({{"role", m.role}, {"content", m.content}});
  try {
    return array.dump();
  } catch (const json::type_error&) {
    // dump() refuses invalid UTF-8 rather than store text that cannot be read back.
    throw Error(ErrorKind::invalid_input, "a chat message is not valid UTF-8: convert the input to UTF-8");
  }
}

std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text) {
  json parsed;
  try {
    parsed = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorKind::invalid_input, std::string("stored chat messages are not valid JSON: ") + e.what());
  }
  return parse_chat_messages(parsed, "messages");
}

}  // namespace ns::chat
