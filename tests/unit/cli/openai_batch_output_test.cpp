// OpenAI Batch output lines: the exact shape, every field, and text that is
// not valid UTF-8.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/cli/openai_batch.h"

using nlohmann::json;
using ns::cli::BatchEndpoint;
using ns::cli::BatchFailure;
using ns::cli::BatchSuccess;

namespace {

BatchSuccess success(BatchEndpoint endpoint) {
  return {.job_id = 314,
          .custom_id = "doc-7",
          .endpoint = endpoint,
          .model = "kimi-k2-q4",
          .created_unix_s = 1767225600,
          .text = "It was a dark \"and\" stormy\nnight.",
          .finish_reason = "length",
          .prompt_tokens = 12,
          .completion_tokens = 30};
}

}  // namespace

TEST_CASE("a completion line has OpenAI's fields in OpenAI's order") {
  CHECK(ns::cli::format_batch_success(success(BatchEndpoint::completions)) ==
        R"({"id":"batch_req_314","custom_id":"doc-7","response":{"status_code":200,"request_id":"req_314",)"
        R"("body":{"id":"cmpl-314","object":"text_completion","created":1767225600,"model":"kimi-k2-q4",)"
        R"("choices":[{"index":0,"text":"It was a dark \"and\" stormy\nnight.","logprobs":null,)"
        R"("finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}},)"
        R"("error":null})");
}

TEST_CASE("a chat completion line carries an assistant message") {
  const std::string line = ns::cli::format_batch_success(success(BatchEndpoint::chat_completions));
  CHECK(line.find('\n') == std::string::npos);
  const json j = json::parse(line);
  CHECK(j["id"] == "batch_req_314");
  CHECK(j["custom_id"] == "doc-7");
  CHECK(j["error"].is_null());
  const json& response = j["response"];
  CHECK(response["status_code"] == 200);
  CHECK(response["request_id"] == "req_314");
  const json& body = response["body"];
  CHECK(body["id"] == "chatcmpl-314");
  CHECK(body["object"] == "chat.completion");
  CHECK(body["created"] == 1767225600);
  CHECK(body["model"] == "kimi-k2-q4");
  REQUIRE(body["choices"].size() == 1);
  const json& choice = body["choices"][0];
  CHECK(choice["index"] == 0);
  CHECK_FALSE(choice.contains("text"));
  // refusal: null, as the OpenAI clients' types require (#31).
  CHECK(choice["message"] ==
        json{{"role", "assistant"}, {"content", "It was a dark \"and\" stormy\nnight."}, {"refusal", nullptr}});
  CHECK(choice["logprobs"].is_null());
  CHECK(choice["finish_reason"] == "length");
  CHECK(body["usage"] == json{{"prompt_tokens", 12}, {"completion_tokens", 30}, {"total_tokens", 42}});
}

TEST_CASE("usage does not overflow, and an empty completion is written as such") {
  BatchSuccess s = success(BatchEndpoint::completions);
  s.prompt_tokens = 2'000'000'000;
  s.completion_tokens = 2'000'000'000;
  s.text = "";
  s.finish_reason = "stop";
  const json j = json::parse(ns::cli::format_batch_success(s));
  CHECK(j["response"]["body"]["usage"]["total_tokens"] == 4'000'000'000LL);
  CHECK(j["response"]["body"]["choices"][0]["text"] == "");
  CHECK(j["response"]["body"]["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("text cut inside a UTF-8 character is written with U+FFFD, still one valid JSON line") {
  BatchSuccess s = success(BatchEndpoint::chat_completions);
  s.text = "caf\xC3";  // the second byte of "é" never came: max_tokens ran out
  const std::string line = ns::cli::format_batch_success(s);
  const json j = json::parse(line);
  CHECK(j["response"]["body"]["choices"][0]["message"]["content"] == "caf\xEF\xBF\xBD");
  s.custom_id = "id-\xFF";
  CHECK(json::parse(ns::cli::format_batch_success(s))["custom_id"] == "id-\xEF\xBF\xBD");
}

TEST_CASE("a failed request has a null response and an error with code and message") {
  BatchFailure f;
  f.job_id = 9;
  f.custom_id = "q-9";
  f.code = "invalid_input";
  f.message = "chat template \"{{ x }}\" is unknown";
  CHECK(ns::cli::format_batch_failure(f) ==
        R"({"id":"batch_req_9","custom_id":"q-9","response":null,)"
        R"("error":{"code":"invalid_input","message":"chat template \"{{ x }}\" is unknown"}})");
}

TEST_CASE("a reply to a request that offered tools: its calls become tool_calls, finish_reason tool_calls") {
  BatchSuccess s = success(BatchEndpoint::chat_completions);
  s.tool_format = ns::chat::ToolCallFormat::hermes_json;
  s.finish_reason = "stop";
  s.text =
      "<think>Paris needs a lookup.</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"location\": \"Paris\"}}\n</tool_call>";
  const json j = json::parse(ns::cli::format_batch_success(s));
  const json& choice = j["response"]["body"]["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  CHECK(choice["message"]["content"].is_null());
  CHECK(choice["message"].contains("refusal"));
  CHECK(choice["message"]["refusal"].is_null());
  CHECK(choice["message"]["reasoning_content"] == "Paris needs a lookup.");
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  const json& call = choice["message"]["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(json::parse(call["function"]["arguments"].get<std::string>()) == json{{"location", "Paris"}});
  CHECK(call["id"].get<std::string>().starts_with("call_" + std::to_string(s.job_id) + "_"));
  // A plain answer stays content, its finish_reason untouched.
  s.text = "It is sunny.";
  const json plain = json::parse(ns::cli::format_batch_success(s));
  CHECK(plain["response"]["body"]["choices"][0]["message"]["content"] == "It is sunny.");
  CHECK(plain["response"]["body"]["choices"][0]["finish_reason"] == "stop");
  CHECK_FALSE(plain["response"]["body"]["choices"][0]["message"].contains("tool_calls"));
}
