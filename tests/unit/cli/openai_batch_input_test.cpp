// OpenAI Batch input lines: every field read, every error path reported.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "daemon/cli/openai_batch.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using ns::SamplingParams;
using ns::cli::BatchEndpoint;
using ns::cli::BatchRequest;
using ns::cli::parse_batch_jsonl;
using ns::cli::parse_batch_request;

namespace {

// Defaults that differ from every value the lines below set, so a field that
// is not read shows up as a default.
SamplingParams distinctive_defaults() {
  return {.max_tokens = 77,
          .temperature = 0.3f,
          .top_k = 11,
          .top_p = 0.71f,
          .min_p = 0.02f,
          .repeat_penalty = 1.05f,
          .repeat_last_n = 33,
          .seed = 5,
          .stop = {"<default stop>"},
          .ignore_eos = false};
}

std::string completion(const std::string& body_fields) {
  return R"({"custom_id": "r1", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Once")" +
         std::string(body_fields.empty() ? "" : ", ") + body_fields + "}}";
}

// The reason `line` is rejected, or "" if it is accepted.
std::string rejection(const std::string& line) {
  return ns::test::error_message(ns::ErrorKind::invalid_input,
                                 [&] { parse_batch_request(line, distinctive_defaults()); });
}

}  // namespace

TEST_CASE("a completions line with every supported field") {
  const BatchRequest r = parse_batch_request(
      R"({"custom_id": "doc-001", "method": "POST", "url": "/v1/completions",
          "body": {"model": "k2", "prompt": "Once upon a time", "max_tokens": 200, "temperature": 0.5,
                   "top_p": 0.9, "seed": 42, "stop": "\n\n", "top_k": 20, "min_p": 0.1,
                   "repeat_penalty": 1.2, "repeat_last_n": 128, "ignore_eos": true}})",
      distinctive_defaults());
  CHECK(r.line == 0);
  CHECK(r.custom_id == "doc-001");
  CHECK(r.endpoint == BatchEndpoint::completions);
  CHECK_FALSE(r.is_chat());
  CHECK(r.model == "k2");
  CHECK(r.prompt == "Once upon a time");
  CHECK(r.messages.empty());
  CHECK(r.sampling.max_tokens == 200);
  CHECK(r.sampling.temperature == doctest::Approx(0.5f));
  CHECK(r.sampling.top_p == doctest::Approx(0.9f));
  CHECK(r.sampling.seed == 42);
  CHECK(r.sampling.stop == std::vector<std::string>{"\n\n"});
  CHECK(r.sampling.top_k == 20);
  CHECK(r.sampling.min_p == doctest::Approx(0.1f));
  CHECK(r.sampling.repeat_penalty == doctest::Approx(1.2f));
  CHECK(r.sampling.repeat_last_n == 128);
  CHECK(r.sampling.ignore_eos);
}

TEST_CASE("a chat line: messages, a stop array, max_completion_tokens") {
  const BatchRequest r = parse_batch_request(
      R"({"custom_id": "c7", "method": "POST", "url": "/v1/chat/completions",
          "body": {"model": "ds3", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi"}],
                   "max_completion_tokens": 64, "stop": ["END", "###"]}})",
      distinctive_defaults());
  CHECK(r.custom_id == "c7");
  CHECK(r.endpoint == BatchEndpoint::chat_completions);
  CHECK(r.is_chat());
  CHECK(r.model == "ds3");
  CHECK(r.prompt.empty());
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "Be brief.");
  CHECK(r.messages[1].role == "user");
  CHECK(r.messages[1].content == "Hi");
  CHECK(r.sampling.max_tokens == 64);
  CHECK(r.sampling.stop == std::vector<std::string>{"END", "###"});
  CHECK(ns::cli::endpoint_url(r.endpoint) == std::string("/v1/chat/completions"));
  CHECK(ns::cli::endpoint_url(BatchEndpoint::completions) == std::string("/v1/completions"));
}

TEST_CASE("absent and null fields take the defaults; an absent model is empty") {
  const SamplingParams d = distinctive_defaults();
  for (const std::string& line :
       {completion(""),
        completion(R"("model": null, "max_tokens": null, "temperature": null, "top_p": null, "seed": null,
                      "stop": null, "top_k": null, "min_p": null, "repeat_penalty": null, "repeat_last_n": null,
                      "ignore_eos": null, "n": null, "logprobs": null, "tools": null)")}) {
    CAPTURE(line);
    const BatchRequest r = parse_batch_request(line, d);
    CHECK(r.model == "");
    CHECK(r.sampling.max_tokens == d.max_tokens);
    CHECK(r.sampling.temperature == d.temperature);
    CHECK(r.sampling.top_k == d.top_k);
    CHECK(r.sampling.top_p == d.top_p);
    CHECK(r.sampling.min_p == d.min_p);
    CHECK(r.sampling.repeat_penalty == d.repeat_penalty);
    CHECK(r.sampling.repeat_last_n == d.repeat_last_n);
    CHECK(r.sampling.seed == d.seed);
    CHECK(r.sampling.stop == d.stop);
    CHECK(r.sampling.ignore_eos == d.ignore_eos);
  }
}

TEST_CASE("the full range of a 64-bit seed; temperature 0 and integer-valued numbers") {
  CHECK(parse_batch_request(completion(R"("seed": 18446744073709551615)"), {}).sampling.seed == UINT64_MAX);
  CHECK(parse_batch_request(completion(R"("seed": 0)"), {}).sampling.seed == 0);
  const BatchRequest r = parse_batch_request(completion(R"("temperature": 0, "top_p": 1, "min_p": 0)"), {});
  CHECK(r.sampling.temperature == 0.0f);
  CHECK(r.sampling.top_p == 1.0f);
  CHECK(r.sampling.min_p == 0.0f);
}

TEST_CASE("fields that change nothing are accepted at their neutral value, and harmless ones ignored") {
  CHECK(rejection(completion(R"("n": 1, "stream": false, "presence_penalty": 0, "frequency_penalty": 0.0,
                                "logprobs": false, "top_logprobs": 0, "echo": false, "best_of": 1,
                                "logit_bias": {}, "suffix": "", "tools": [], "functions": [],
                                "tool_choice": "none", "function_call": "none",
                                "response_format": {"type": "text"})")) == "");
  CHECK(rejection(completion(R"("logprobs": 0)")) == "");  // /v1/completions' integer form
  CHECK(rejection(completion(R"("user": "u-1", "metadata": {"k": "v"}, "store": true, "service_tier": "auto",
                                "parallel_tool_calls": true)")) == "");
}

TEST_CASE("response_format and grammar become the request's grammar; a schema keeps its key order") {
  const BatchRequest mode =
      parse_batch_request(completion(R"("response_format": {"type": "json_object"})"), distinctive_defaults());
  CHECK(mode.sampling.grammar.find("root ::= object") == 0);
  const BatchRequest schema = parse_batch_request(
      completion(R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
                   "schema": {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}},
                              "required": ["zeta", "alpha"], "additionalProperties": false}}})"),
      distinctive_defaults());
  const ns::grammar::Grammar g = ns::grammar::parse_gbnf(schema.sampling.grammar);
  ns::grammar::Matcher in_order(g), sorted(g);
  CHECK(in_order.accept_bytes(R"({"zeta": 1, "alpha": "a"})"));  // the schema's order, not the sorted one
  CHECK(in_order.complete());
  CHECK_FALSE(sorted.accept_bytes(R"({"alpha": "a", "zeta": 1})"));
  const BatchRequest gbnf =
      parse_batch_request(completion(R"("grammar": "root ::= \"yes\" | \"no\"")"), distinctive_defaults());
  CHECK(gbnf.sampling.grammar == "root ::= \"yes\" | \"no\"");
  CHECK(parse_batch_request(completion(R"("response_format": {"type": "text"})"), distinctive_defaults())
            .sampling.grammar == "");
}

TEST_CASE("n, logprobs and top_logprobs are read on both endpoints") {
  const BatchRequest c = parse_batch_request(completion(R"("n": 3, "logprobs": 5)"), {});
  CHECK(c.sampling.n == 3);
  CHECK(c.sampling.logprobs);
  CHECK(c.sampling.top_logprobs == 5);
  const BatchRequest zero = parse_batch_request(completion(R"("logprobs": 0)"), {});  // the chosen token's only
  CHECK(zero.sampling.logprobs);
  CHECK(zero.sampling.top_logprobs == 0);
  const BatchRequest off = parse_batch_request(completion(R"("logprobs": false, "n": 1)"), {});
  CHECK_FALSE(off.sampling.logprobs);
  CHECK(off.sampling.n == 1);
  const BatchRequest chat = parse_batch_request(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions",
          "body": {"messages": [{"role": "user", "content": "Hi"}], "logprobs": true, "top_logprobs": 20, "n": 2}})",
      {});
  CHECK(chat.sampling.logprobs);
  CHECK(chat.sampling.top_logprobs == 20);
  CHECK(chat.sampling.n == 2);
}

TEST_CASE("every malformed line is rejected with its reason") {
  struct Case {
    std::string line;
    const char* reason;
  };
  const std::string chat_head = R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": )";
  const Case cases[] = {
      // the line itself
      {R"({"custom_id": "a", )", "not valid JSON: parse error at line 1, column 20"},
      {"[1, 2]", "the line is an array: each line must be one JSON object"},
      {R"("text")", "the line is a string"},
      {R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}, "extra": 1})",
       "unknown field \"extra\""},
      {R"({"method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}})", "no \"custom_id\""},
      {R"({"custom_id": 7, "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}})",
       "custom_id must be a string, not a number"},
      {R"({"custom_id": "", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}})",
       "custom_id is empty"},
      {R"({"custom_id": "a", "url": "/v1/completions", "body": {"prompt": "x"}})", "no \"method\": use \"POST\""},
      {R"({"custom_id": "a", "method": "GET", "url": "/v1/completions", "body": {"prompt": "x"}})",
       "method is \"GET\": batch requests are \"POST\""},
      {R"({"custom_id": "a", "method": 1, "url": "/v1/completions", "body": {"prompt": "x"}})",
       "method must be a string"},
      {R"({"custom_id": "a", "method": "POST", "body": {"prompt": "x"}})", "no \"url\""},
      {R"({"custom_id": "a", "method": "POST", "url": 3, "body": {"prompt": "x"}})", "url must be a string"},
      {R"({"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}})",
       "url is \"/v1/embeddings\": nightshift serves /v1/completions and /v1/chat/completions"},
      {R"({"custom_id": "a", "method": "POST", "url": "/v1/completions"})", "no \"body\""},
      {R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": "x"})",
       "body is a string, not an object"},
      // the input
      {R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {}})", "body has no \"prompt\""},
      {completion("").replace(completion("").find("\"Once\""), 6, "null"), "body has no \"prompt\""},
      {completion("").replace(completion("").find("\"Once\""), 6, "[\"a\", \"b\"]"),
       "body.prompt is an array: put one prompt per line"},
      {completion("").replace(completion("").find("\"Once\""), 6, "5"), "body.prompt must be a string, not a number"},
      {completion("").replace(completion("").find("\"Once\""), 6, "\"\""), "body.prompt is empty"},
      {completion(R"("messages": [])"), "body.messages does not belong to /v1/completions, which takes body.prompt"},
      {chat_head + R"({"model": "m"}})", "body has no \"messages\""},
      {chat_head + R"({"prompt": "x", "messages": []}})",
       "body.prompt does not belong to /v1/chat/completions, which takes body.messages"},
      {chat_head + R"({"messages": [{"role": "robot", "content": "x"}]}})", "body.messages[0].role is \"robot\""},
      {chat_head + R"({"messages": []}})", "body.messages is empty"},
      {completion(R"("model": 3)"), "body.model must be a string, not a number"},
      {completion(R"("model": "")"), "body.model is empty"},
      // sampling values: types, ranges, SamplingParams::validate()
      {completion(R"("max_tokens": 0)"), "body.max_tokens = 0 is invalid: must be in 1..1000000"},
      {completion(R"("max_tokens": 1.5)"), "body.max_tokens must be an integer, not 1.5"},
      {completion(R"("max_tokens": "10")"), "body.max_tokens must be an integer, not a string"},
      {completion(R"("max_tokens": 99999999999)"), "body.max_tokens = 99999999999 is out of range"},
      {completion(R"("max_tokens": 9223372036854775808)"), "body.max_tokens = 9223372036854775808 is out of range"},
      {completion(R"("max_completion_tokens": -1)"), "body.max_tokens = -1 is invalid"},
      {completion(R"("max_tokens": 5, "max_completion_tokens": 6)"), "both max_tokens and max_completion_tokens"},
      {completion(R"("temperature": "hot")"), "body.temperature must be a number, not a string"},
      {completion(R"("temperature": 11)"), "body.temperature = 11 is invalid"},
      {completion(R"("top_p": 0)"), "body.top_p = 0 is invalid"},
      {completion(R"("top_p": 1e39)"), "body.top_p = inf is invalid"},
      {completion(R"("min_p": 1)"), "body.min_p = 1 is invalid"},
      {completion(R"("repeat_penalty": 0)"), "body.repeat_penalty = 0 is invalid"},
      {completion(R"("top_k": -1)"), "body.top_k = -1 is invalid"},
      {completion(R"("top_k": true)"), "body.top_k must be an integer, not a boolean"},
      {completion(R"("repeat_last_n": -5)"), "body.repeat_last_n = -5 is invalid"},
      {completion(R"("seed": -1)"), "body.seed = -1 is invalid: must be a non-negative integer"},
      {completion(R"("seed": 1.5)"), "body.seed must be an integer, not 1.5"},
      {completion(R"("seed": "1")"), "body.seed must be an integer, not a string"},
      {completion(R"("stop": 5)"), "body.stop must be a string or an array of strings, not a number"},
      {completion(R"("stop": ["a", 1])"), "body.stop[1] must be a string, not a number"},
      {completion(R"("stop": "")"), "body.stop[0] is 0 bytes long"},
      {completion(R"("stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
       "body.stop has 17 strings: at most 16 are allowed"},
      {completion(R"("ignore_eos": "yes")"), "body.ignore_eos must be true or false, not a string"},
      // n and logprobs out of range
      {completion(R"("n": 0)"), "body.n = 0 is invalid: must be in 1..128"},
      {completion(R"("n": 129)"), "body.n = 129 is invalid"},
      {completion(R"("n": 1.5)"), "body.n must be an integer, not 1.5"},
      {completion(R"("logprobs": 21)"), "body.top_logprobs = 21 is invalid: must be in 0..20"},
      {completion(R"("logprobs": "yes")"), "body.logprobs must be an integer (alternatives per token) or a boolean"},
      {completion(R"("top_logprobs": 3)"), "body.top_logprobs = 3 needs logprobs: true"},
      {completion(R"("logprobs": true, "top_logprobs": -1)"), "body.top_logprobs = -1 is invalid"},
      {R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions",
           "body": {"messages": [{"role": "user", "content": "Hi"}], "logprobs": 5}})",
       "body.logprobs must be true or false, not 5"},
      // OpenAI fields nightshift cannot honour
      {completion(R"("stream": true)"), "body.stream = true is not supported: batch requests do not stream"},
      {completion(R"("stream_options": {"include_usage": true})"), "body.stream_options = {\"include_usage\":true}"},
      {completion(R"("presence_penalty": 0.5)"), "body.presence_penalty = 0.5 is not supported: use repeat_penalty"},
      {completion(R"("frequency_penalty": 1)"), "body.frequency_penalty = 1 is not supported"},
      {completion(R"("echo": true)"), "body.echo = true is not supported"},
      {completion(R"("best_of": 3)"), "body.best_of = 3 is not supported"},
      {completion(R"("logit_bias": {"50256": -100})"), "body.logit_bias = {\"50256\":-100} is not supported"},
      {completion(R"("suffix": "end")"), "body.suffix = \"end\" is not supported"},
      {completion(R"("tools": [{"type": "function"}])"),
       "body.tools = [{\"type\":\"function\"}] is not supported by /v1/completions"},
      {completion(R"("functions": [{"name": "f"}])"), "body.functions"},
      {completion(R"("tool_choice": "auto")"), "body.tool_choice = \"auto\" is not supported by /v1/completions"},
      {completion(R"("function_call": "auto")"), "body.function_call = \"auto\" is not supported"},
      {completion(R"("response_format": {"type": "xml"})"), "body.response_format.type = \"xml\": use"},
      {completion(R"("response_format": "json")"), "body.response_format must be an object"},
      {completion(R"("response_format": {"type": "json_schema"})"),
       "body.response_format.json_schema must be an object"},
      {completion(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})"),
       "body.response_format.json_schema has no \"schema\""},
      {completion(R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}})"),
       "body.response_format.json_schema.extra is not a field"},
      {completion(R"("response_format": {"type": "json_object", "schema": {}})"),
       "body.response_format.schema is not a field of a \"json_object\" response_format"},
      {completion(R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object",
          "properties": {"date": {"type": "string", "format": "week"}}}}})"),
       "body.response_format.json_schema.schema.properties.date.format: format \"week\" is not supported"},
      {completion(R"("grammar": "root ::= nothing")"),
       "body.grammar: grammar line 1, column 10: rule 'nothing' is used"},
      {completion(R"("grammar": 3)"), "body.grammar must be a string"},
      {completion(R"("grammar": "root ::= \"a\"", "response_format": {"type": "json_object"})"),
       "body has both grammar and response_format"},
      {completion(R"("logit_bias": {"1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9})"),
       "body.logit_bias = {\"1\":1,\"2\":2,\"3\":3,\"4\":4,\"5\":5,\"6\":6,... is not supported"},  // shortened
      // a typo is not silently dropped
      {completion(R"("temprature": 0.2)"), "body.temprature is not a field nightshift knows"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    const std::string why = rejection(c.line);
    CHECK(why.find(c.reason) != std::string::npos);
    if (why.find(c.reason) == std::string::npos) MESSAGE("got: \"" << why << "\"");
  }
}

TEST_CASE("a file: valid lines kept, invalid ones reported by line number, duplicates rejected") {
  const std::string text =
      "\xEF\xBB\xBF"  // a byte-order mark, as some editors write
      R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "one"}})"
      "\r\n"
      "\n"
      "   \t\n"
      R"({"custom_id": "b", "method": "POST", "url": "/v1/completions", "body": {"prompt": "two", "max_tokens": 0}})"
      "\n"
      "not json at all\n"
      R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "again"}})"
      "\n"
      R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions",)"
      R"( "body": {"messages": [{"role": "user", "content": "three"}]}})";  // no final newline
  const ns::cli::BatchInput in = parse_batch_jsonl(text, distinctive_defaults());
  CHECK(in.lines == 5);
  REQUIRE(in.requests.size() == 2);
  CHECK(in.requests[0].custom_id == "a");
  CHECK(in.requests[0].line == 1);
  CHECK(in.requests[0].prompt == "one");
  CHECK(in.requests[0].sampling.max_tokens == 77);
  CHECK(in.requests[1].custom_id == "c");
  CHECK(in.requests[1].line == 7);
  CHECK(in.requests[1].messages.at(0).content == "three");
  REQUIRE(in.errors.size() == 3);
  CHECK(in.errors[0].line == 4);
  CHECK(in.errors[0].custom_id == "b");
  CHECK(in.errors[0].message == "body.max_tokens = 0 is invalid: must be in 1..1000000");
  CHECK(in.errors[1].line == 5);
  CHECK(in.errors[1].custom_id == "");
  CHECK(in.errors[1].message.find("not valid JSON") == 0);
  CHECK(in.errors[2].line == 6);
  CHECK(in.errors[2].custom_id == "a");
  CHECK(in.errors[2].message == "custom_id \"a\" is already used on line 1: each request needs its own");

  CHECK(ns::cli::describe(in.errors[0]) ==
        "line 4 (custom_id \"b\"): body.max_tokens = 0 is invalid: must be in 1..1000000");
  CHECK(ns::cli::describe(in.errors[1]).find("line 5: not valid JSON") == 0);
}

TEST_CASE("an invalid first use does not reserve its custom_id") {
  const std::string text =
      R"({"custom_id": "x", "method": "POST", "url": "/v1/completions", "body": {"prompt": ""}})"
      "\n"
      R"({"custom_id": "x", "method": "POST", "url": "/v1/completions", "body": {"prompt": "fixed"}})"
      "\n";
  const auto in = parse_batch_jsonl(text, {});
  REQUIRE(in.requests.size() == 1);
  CHECK(in.requests[0].line == 2);
  REQUIRE(in.errors.size() == 1);
  CHECK(in.errors[0].line == 1);
}

TEST_CASE("empty input and blank-only input have no lines") {
  for (const char* text : {"", "\n\n", "\r\n  \n", "\xEF\xBB\xBF"}) {
    const auto in = parse_batch_jsonl(text, {});
    CHECK(in.lines == 0);
    CHECK(in.requests.empty());
    CHECK(in.errors.empty());
  }
}

TEST_CASE("10,000 lines parse quickly") {
  std::string text;
  for (int i = 0; i < 10000; ++i)
    text +=
        R"({"custom_id": "req-)" + std::to_string(i) +
        R"(", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "Summarise document )" +
        std::to_string(i) + R"("}], "max_tokens": 300, "temperature": 0.7, "stop": ["\n\n"]}})" + "\n";
  const auto start = std::chrono::steady_clock::now();
  const auto in = parse_batch_jsonl(text, {});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(in.requests.size() == 10000);
  CHECK(in.errors.empty());
  CHECK(in.requests.back().custom_id == "req-9999");
  CHECK(in.requests.back().line == 10000);
  MESSAGE("parsed 10,000 chat lines (" << text.size() / 1024 << " KiB) in " << ms << " ms");
}

TEST_CASE(
    "a chat line with tools, tool calls and tool results is kept for the template; tool_choice none drops tools") {
  const std::string line = R"({"custom_id": "t1", "method": "POST", "url": "/v1/chat/completions", "body": {
    "messages": [{"role": "user", "content": "Weather?"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}, "description": "d"}}],
    "tool_choice": "auto"}})";
  const BatchRequest r = parse_batch_request(line, {});
  CHECK(r.tools ==
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"},"description":"d"}}])");
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[1].tool_calls.find("get_weather") != std::string::npos);
  CHECK(r.messages[2].tool_call_id == "c1");
  std::string none = line;
  none.replace(none.find("\"auto\""), 6, "\"none\"");
  CHECK(parse_batch_request(none, {}).tools.empty());
  std::string forced = line;
  forced.replace(forced.find("\"auto\""), 6, "\"required\"");
  CHECK(rejection(forced).find("body.tool_choice = \"required\" is not supported") != std::string::npos);
}
