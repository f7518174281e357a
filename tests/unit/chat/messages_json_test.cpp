// OpenAI-style messages read into ChatMessage, and the stored form round trip.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat/chat_messages_json.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using nlohmann::json;
using ns::chat::ChatMessage;
using ns::chat::parse_chat_messages;

namespace {

// The error message for `messages_json`, or "" if it parses.
std::string error_for(const std::string& messages_json) {
  return ns::test::error_message(ns::ErrorKind::invalid_input,
                                 [&] { parse_chat_messages(json::parse(messages_json), "body.messages"); });
}

}  // namespace

TEST_CASE("roles and string content are read in order") {
  const auto messages = parse_chat_messages(json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi", "name": "ann"},
      {"role": "assistant", "content": "Hello.", "tool_calls": []},
      {"role": "tool", "content": "42", "tool_call_id": "call_1"},
      {"role": "user", "content": ""}])"),
                                            "body.messages");
  REQUIRE(messages.size() == 5);
  CHECK(messages[0].role == "system");
  CHECK(messages[0].content == "Be brief.");
  CHECK(messages[1].role == "user");
  CHECK(messages[1].content == "Hi");
  CHECK(messages[2].role == "assistant");
  CHECK(messages[2].content == "Hello.");
  CHECK(messages[3].role == "tool");
  CHECK(messages[3].content == "42");
  CHECK(messages[4].content == "");
}

TEST_CASE("text parts are joined with newlines, as llama.cpp joins them") {
  const auto messages = parse_chat_messages(
      json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
                      {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "b"}]},
                      {"role": "user", "content": []}])"),
      "m");
  CHECK(messages[0].content == "one\ntwo");
  CHECK(messages[1].content == "b");  // nothing before it, so no newline
  CHECK(messages[2].content == "");
}

TEST_CASE("every malformed message is reported with its path") {
  struct Case {
    const char* input;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"role": "user"})", "body.messages is an object, not an array of messages"},
      {R"([])", "body.messages is empty"},
      {R"(["hi"])", "body.messages[0] is a string, not an object"},
      {R"([{"content": "x"}])", "body.messages[0] has no \"role\""},
      {R"([{"role": 1, "content": "x"}])", "body.messages[0].role is a number, not a string"},
      {R"([{"role": "narrator", "content": "x"}])", "body.messages[0].role is \"narrator\": use one of system, user"},
      {R"([{"role": "developer", "content": "x"}])", "body.messages[0].role is \"developer\": use \"system\""},
      {R"([{"role": "user"}])", "body.messages[0] has no \"content\""},
      {R"([{"role": "user", "content": null}])", "body.messages[0].content is null"},
      {R"([{"role": "user", "content": 5}])", "body.messages[0].content is a number: give a string or an array"},
      {R"([{"role": "user", "content": ["x"]}])", "body.messages[0].content[0] is not an object"},
      {R"([{"role": "user", "content": [{"text": "x"}]}])", "body.messages[0].content[0] has no string \"type\""},
      {R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}])",
       "body.messages[0].content[0] is of type \"image_url\": only text parts are supported"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])", "body.messages[0].content[0] has no string \"text\""},
      {R"([{"role": "user", "content": [{"type": "text", "text": 3}]}])",
       "body.messages[0].content[0] has no string \"text\""},
      {R"([{"role": "assistant", "content": "x", "tool_calls": [{"id": "c"}]}])",
       "body.messages[0].tool_calls[0] has no \"function\""},
      {R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}])",
       "body.messages[0].tool_calls[0].function.arguments is not a JSON text"},
      {R"([{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}])",
       "body.messages[0].tool_calls belongs to an assistant message"},
      {R"([{"role": "assistant", "content": null}])", "body.messages[0].content is null"},
      {R"([{"role": "tool", "content": "x", "tool_call_id": 7}])", "body.messages[0].tool_call_id is a number"},
      {R"([{"role": "assistant", "content": "x", "function_call": {"name": "f"}}])",
       "body.messages[0].function_call is OpenAI's old form: give tool_calls instead"},
      {R"([{"role": "user", "content": "x", "weight": 2}])", "body.messages[0] has an unknown field \"weight\""},
      {R"([{"role": "user", "content": "ok"}, {"role": "user", "content": 1}])", "body.messages[1].content"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.input);
    const std::string what = error_for(c.input);
    CHECK(what.find(c.expected) != std::string::npos);
    if (what.find(c.expected) == std::string::npos) MESSAGE("got: " << what);
  }
}

TEST_CASE("the stored form round trips, whatever the text holds") {
  const std::vector<ChatMessage> messages = {
      {"system", "quotes \" and \\ and\nnewlines"}, {"user", "ünïcödé ｜ <|im_end|>"}, {"assistant", ""}};
  const std::string stored = ns::chat::chat_messages_to_json(messages);
  CHECK(json::parse(stored) == json::parse(R"([{"role":"system","content":"quotes \" and \\ and\nnewlines"},
      {"role":"user","content":"ünïcödé ｜ <|im_end|>"},{"role":"assistant","content":""}])"));
  const auto back = ns::chat::chat_messages_from_json(stored);
  REQUIRE(back.size() == messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    CHECK(back[i].role == messages[i].role);
    CHECK(back[i].content == messages[i].content);
  }
}

TEST_CASE("storing invalid UTF-8 and reading broken JSON are errors") {
  CHECK_THROWS_WITH_AS(ns::chat::chat_messages_to_json({{"user", std::string("bad \xff byte")}}),
                       doctest::Contains("not valid UTF-8"), ns::Error);
  CHECK_THROWS_WITH_AS(ns::chat::chat_messages_from_json("[{\"role\": "), doctest::Contains("not valid JSON"),
                       ns::Error);
  CHECK_THROWS_WITH_AS(ns::chat::chat_messages_from_json("{}"), doctest::Contains("messages is an object"), ns::Error);
}

TEST_CASE("tool calls, tool results, reasoning and tools are kept for the template, key order included") {
  const auto body = nlohmann::json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21}"}])");
  const auto messages = ns::chat::parse_chat_messages(body, "body.messages");
  REQUIRE(messages.size() == 3);
  CHECK(messages[1].content.empty());
  CHECK(messages[1].reasoning_content == "Call the tool.");
  // arguments' text becomes the object it encodes, in its own key order (location before unit)
  CHECK(
      messages[1].tool_calls ==
      R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"location":"Paris","unit":"celsius"}}}])");
  CHECK(messages[2].tool_call_id == "call_1");
  CHECK(messages[2].name == "get_weather");
  const std::string tools = ns::chat::parse_tools(
      nlohmann::ordered_json::parse(
          R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}, "description": "d"}}])"),
      "body.tools");
  CHECK(tools ==
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"},"description":"d"}}])");
  const std::string stored = ns::chat::conversation_to_json(messages, tools);
  const ns::chat::Conversation back = ns::chat::conversation_from_json(stored);
  CHECK(back.tools == tools);
  REQUIRE(back.messages.size() == 3);
  CHECK(back.messages[1].tool_calls == messages[1].tool_calls);
  CHECK(back.messages[2].tool_call_id == "call_1");
  // Without tools the stored form stays the plain array earlier rows hold.
  CHECK(ns::chat::conversation_to_json({{"user", "hi"}}, "") == R"([{"role":"user","content":"hi"}])");
  CHECK_THROWS_WITH_AS(ns::chat::parse_tools(nlohmann::ordered_json::parse(R"([{"type": "retrieval"}])"), "body.tools"),
                       doctest::Contains("body.tools[0] is not a {\"type\": \"function\""), ns::Error);
}
