// OpenAI-style messages <-> ChatMessage. Strict on purpose: a batch runs
// unattended overnight, so a field we would silently drop is reported at
// submit time instead of producing an answer to a different question.
#include "engine/chat/chat_messages_json.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ns::chat {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

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

std::string parse_content(const json& message, const std::string& where, bool may_be_empty) {
  const auto it = message.find("content");
  if (it == message.end() && may_be_empty) return "";
  if (it == message.end()) fail(where, "has no \"content\"");
  const std::string path = where + ".content";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null() && may_be_empty) return "";
  if (it->is_null()) fail(path, "is null: a message without tool_calls needs text");
  if (!it->is_array()) fail(path, "is " + a_type(*it) + ": give a string or an array of text parts");
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

std::string optional_string(const json& message, const char* key, const std::string& where) {
  const auto it = message.find(key);
  if (it == message.end() || it->is_null()) return "";
  if (!it->is_string()) fail(where + "." + key, "is " + a_type(*it) + ", not a string");
  return it->get<std::string>();
}

// An assistant turn's tool_calls as the templates read them: [{id, type, function: {name, arguments}}], with
// arguments as an object (OpenAI sends a JSON text; llama.cpp's server and transformers' templates take the
// object, so a text that parses is given as what it encodes).
std::string parse_tool_calls(const json& message, const std::string& where) {
  const auto it = message.find("tool_calls");
  if (it == message.end() || it->is_null() || (it->is_array() && it->empty())) return "";
  const std::string path = where + ".tool_calls";
  if (!it->is_array()) fail(path, "is " + a_type(*it) + ", not an array of {id, type, function} calls");
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& c = (*it)[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!c.is_object()) fail(at, "is " + a_type(c) + ", not an object {id, type, function}");
    const auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) fail(at, "has no \"function\": {\"name\", \"arguments\"}");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
      fail(at + ".function", "has no string \"name\"");
    ordered_json args = ordered_json::object();
    if (const auto a = fn->find("arguments"); a != fn->end() && !a->is_null()) {
      if (a->is_string()) {
        try {
          args = ordered_json::parse(a->get<std::string>());
        } catch (const ordered_json::parse_error&) {
          fail(at + ".function.arguments", "is not a JSON text: give the call's arguments as a JSON object");
        }
      } else if (a->is_object()) {
        args = ordered_json::parse(a->dump());
      } else {
        fail(at + ".function.arguments", "is " + a_type(*a) + ": give a JSON object or its text");
      }
    }
    ordered_json call = ordered_json::object();
    if (const auto id = c.find("id"); id != c.end() && id->is_string()) call["id"] = id->get<std::string>();
    call["type"] = "function";
    call["function"] = {{"name", name->get<std::string>()}, {"arguments", std::move(args)}};
    calls.push_back(std::move(call));
  }
  return calls.dump();
}

void check_other_fields(const json& message, const std::string& where) {
  for (const auto& [key, value] : message.items()) {
    if (key == "role" || key == "content" || key == "name" || key == "tool_call_id" || key == "tool_calls" ||
        key == "reasoning_content" || key == "refusal")
      continue;
    if (key == "function_call" && value.is_null()) continue;
    if (key == "function_call") fail(where + ".function_call", "is OpenAI's old form: give tool_calls instead");
    fail(where, "has an unknown field \"" + key +
                    "\": a message has role, content and optionally name, "
                    "tool_calls, tool_call_id, reasoning_content");
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
    if (msg.role == "assistant")
      msg.tool_calls = parse_tool_calls(m, path);
    else if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      fail(path + ".tool_calls", "belongs to an assistant message");
    msg.content = parse_content(m, path, !msg.tool_calls.empty());
    msg.name = optional_string(m, "name", path);
    msg.tool_call_id = optional_string(m, "tool_call_id", path);
    msg.reasoning_content = optional_string(m, "reasoning_content", path);
    check_other_fields(m, path);
    out.push_back(std::move(msg));
  }
  return out;
}

static ordered_json chat_messages_value(const std::vector<ChatMessage>& messages) {
  ordered_json array = ordered_json::array();
  for (const auto& m : messages) {
    ordered_json o = {{"role", m.role}, {"content", m.content}};
    if (!m.name.empty()) o["name"] = m.name;
    if (!m.tool_call_id.empty()) o["tool_call_id"] = m.tool_call_id;
    if (!m.reasoning_content.empty()) o["reasoning_content"] = m.reasoning_content;
    if (!m.tool_calls.empty()) o["tool_calls"] = ordered_json::parse(m.tool_calls);
    array.push_back(std::move(o));
  }
  return array;
}

std::string parse_tools(const ordered_json& tools, const std::string& where) {
  if (tools.is_null() || (tools.is_array() && tools.empty())) return "";
  if (!tools.is_array()) fail(where, "is " + a_type(json(tools)) + ", not an array of {\"type\": \"function\", ...}");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function")
      fail(at, "is not a {\"type\": \"function\", \"function\": {...}} tool (nightshift's models call functions)");
    const auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      fail(at + ".function", "needs a string \"name\"");
  }
  // Kept as given, key order included: a template prints the definitions with tojson.
  return tools.dump();
}

std::string conversation_to_json(const std::vector<ChatMessage>& messages, const std::string& tools) {
  try {
    ordered_json a = chat_messages_value(messages);
    if (!tools.empty()) a.insert(a.begin(), ordered_json{{"role", kToolsRole}, {"content", tools}});
    return a.dump();
  } catch (const json::type_error&) {
    // dump() refuses invalid UTF-8 rather than store text that cannot be read back.
    throw Error(ErrorKind::invalid_input, "a chat message is not valid UTF-8: convert the input to UTF-8");
  }
}

std::string chat_messages_to_json(const std::vector<ChatMessage>& messages) {
  return conversation_to_json(messages, "");
}

Conversation conversation_from_json(std::string_view json_text) {
  json parsed;
  try {
    parsed = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorKind::invalid_input, std::string("stored chat messages are not valid JSON: ") + e.what());
  }
  Conversation c;
  if (parsed.is_array() && !parsed.empty() && parsed[0].is_object() && parsed[0].value("role", "") == kToolsRole) {
    const auto& tools = parsed[0].find("content");
    if (tools == parsed[0].end() || !tools->is_string())
      throw Error(ErrorKind::invalid_input, "stored chat messages: the tools element has no JSON text");
    c.tools = parse_tools(ordered_json::parse(tools->get<std::string>()), "tools");
    parsed.erase(parsed.begin());
  }
  c.messages = parse_chat_messages(parsed, "messages");
  return c;
}

std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text) {
  return conversation_from_json(json_text).messages;
}

}  // namespace ns::chat
