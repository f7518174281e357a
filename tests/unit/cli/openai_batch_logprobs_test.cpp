// OpenAI Batch output lines with several choices and logprobs: every field of
// OpenAI's chat and legacy completions shapes, checked one by one.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/cli/openai_batch.h"
#include "engine/sampler/logprobs.h"
#include "common/error.h"

using nlohmann::json;
using ns::cli::BatchEndpoint;
using ns::cli::BatchSuccess;
using ns::sampler::ChoiceLogprobs;
using ns::sampler::TokenPieces;

namespace {

// Choice 0: tokens 7 ("Hi"), 9 (" é": 3 bytes, 2 characters), 4 (the first byte of "€": not UTF-8 alone).
// Top 2 alternatives each. Choice 1: one token, 9, whose top holds a -inf.
ChoiceLogprobs choice0() {
  ChoiceLogprobs c;
  c.k = 2;
  c.entries = {{7, -0.25f}, {7, -0.25f}, {3, -1.5f},  //
               {9, -2.0f},  {5, -0.5f},  {9, -2.0f},  //
               {4, -0.75f}, {4, -0.75f}, {3, -1.25f}};
  return c;
}
ChoiceLogprobs choice1() {
  ChoiceLogprobs c;
  c.k = 2;
  c.entries = {{9, -0.125f}, {9, -0.125f}, {5, -std::numeric_limits<float>::infinity()}};
  return c;
}
TokenPieces pieces() { return {{3, "!"}, {4, "\xE2"}, {5, " the"}, {7, "Hi"}, {9, " \xC3\xA9"}}; }

BatchSuccess with_logprobs(BatchEndpoint endpoint) {
  BatchSuccess s{.job_id = 5,
                 .custom_id = "x",
                 .endpoint = endpoint,
                 .model = "m",
                 .created_unix_s = 1,
                 .text = "Hi \xC3\xA9\xE2",
                 .finish_reason = "length",
                 .prompt_tokens = 4};
  s.completion_tokens = 4;  // 3 + 1: every choice's tokens
  s.more_choices = {{" \xC3\xA9", "stop"}};
  const std::vector<ChoiceLogprobs> records = {choice0(), choice1()};
  const TokenPieces p = pieces();
  s.logprobs = ns::sampler::encode_logprobs(records, &p);
  return s;
}

const json& body_of(const json& line) { return line["response"]["body"]; }

}  // namespace

TEST_CASE("chat: n choices with OpenAI's content logprobs, field by field") {
  const json line = json::parse(ns::cli::format_batch_success(with_logprobs(BatchEndpoint::chat_completions)));
  const json& body = body_of(line);
  REQUIRE(body["choices"].size() == 2);
  CHECK(body["usage"]["prompt_tokens"] == 4);
  CHECK(body["usage"]["completion_tokens"] == 4);
  CHECK(body["usage"]["total_tokens"] == 8);
  const json& c0 = body["choices"][0];
  CHECK(c0["index"] == 0);
  CHECK(c0["finish_reason"] == "length");
  CHECK(c0["message"]["content"] == "Hi \xC3\xA9\xEF\xBF\xBD");
  REQUIRE(c0["logprobs"].contains("refusal"));  // nullable, but present: OpenAI's ChoiceLogprobs type
  CHECK(c0["logprobs"]["refusal"].is_null());
  const json& content = c0["logprobs"]["content"];
  CHECK(c0["logprobs"].size() == 2);  // content and refusal
  REQUIRE(content.size() == 3);
  CHECK(content[0]["token"] == "Hi");
  CHECK(content[0]["logprob"] == -0.25);
  CHECK(content[0]["bytes"] == json::array({72, 105}));
  REQUIRE(content[0]["top_logprobs"].size() == 2);
  CHECK(content[0]["top_logprobs"][0] == json{{"token", "Hi"}, {"logprob", -0.25}, {"bytes", {72, 105}}});
  CHECK(content[0]["top_logprobs"][1] == json{{"token", "!"}, {"logprob", -1.5}, {"bytes", {33}}});
  CHECK(content[1]["token"] == " \xC3\xA9");
  CHECK(content[1]["logprob"] == -2.0);
  CHECK(content[1]["bytes"] == json::array({32, 0xC3, 0xA9}));
  CHECK(content[1]["top_logprobs"][0]["token"] == " the");
  CHECK(content[1]["top_logprobs"][0]["logprob"] == -0.5);
  // A piece that is part of a character: U+FFFD as its token, its exact byte in bytes.
  CHECK(content[2]["token"] == "\xEF\xBF\xBD");
  CHECK(content[2]["bytes"] == json::array({0xE2}));
  CHECK(content[2]["logprob"] == -0.75);
  // Keys in OpenAI's order (the parsed json sorts them; the line itself keeps the order).
  const std::string raw = ns::cli::format_batch_success(with_logprobs(BatchEndpoint::chat_completions));
  CHECK(raw.find(R"({"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[)") != std::string::npos);

  const json& c1 = body["choices"][1];
  CHECK(c1["index"] == 1);
  CHECK(c1["finish_reason"] == "stop");
  CHECK(c1["message"]["content"] == " \xC3\xA9");
  REQUIRE(c1["logprobs"]["content"].size() == 1);
  CHECK(c1["logprobs"]["content"][0]["logprob"] == -0.125);
  CHECK(c1["logprobs"]["content"][0]["top_logprobs"][1]["logprob"] == -9999.0);  // -inf, as OpenAI writes it
}

TEST_CASE("completions: tokens, token_logprobs, top_logprobs and text_offset, field by field") {
  const json line = json::parse(ns::cli::format_batch_success(with_logprobs(BatchEndpoint::completions)));
  const json& body = body_of(line);
  REQUIRE(body["choices"].size() == 2);
  const json& lp = body["choices"][0]["logprobs"];
  CHECK(lp.size() == 4);
  CHECK(lp["tokens"] == json::array({"Hi", " \xC3\xA9", "\xEF\xBF\xBD"}));
  CHECK(lp["token_logprobs"] == json::array({-0.25, -2.0, -0.75}));
  REQUIRE(lp["top_logprobs"].size() == 3);
  CHECK(lp["top_logprobs"][0] == json{{"Hi", -0.25}, {"!", -1.5}});
  CHECK(lp["top_logprobs"][1] == json{{" the", -0.5}, {" \xC3\xA9", -2.0}});
  CHECK(lp["top_logprobs"][2] == json{{"\xEF\xBF\xBD", -0.75}, {"!", -1.25}});
  // Characters before each token: "Hi" is 2, " é" 2 more.
  CHECK(lp["text_offset"] == json::array({0, 2, 4}));
  const json& lp1 = body["choices"][1]["logprobs"];
  CHECK(lp1["tokens"] == json::array({" \xC3\xA9"}));
  CHECK(lp1["token_logprobs"] == json::array({-0.125}));
  CHECK(lp1["top_logprobs"][0][" the"] == -9999.0);
  CHECK(body["choices"][1]["text"] == " \xC3\xA9");
  const std::string raw = ns::cli::format_batch_success(with_logprobs(BatchEndpoint::completions));
  CHECK(raw.find(R"("logprobs":{"tokens":["Hi",)") != std::string::npos);
}

TEST_CASE("n choices without logprobs: every choice indexed, logprobs null") {
  BatchSuccess s = with_logprobs(BatchEndpoint::completions);
  s.logprobs.clear();
  s.more_choices.push_back({"third", "length"});
  const json body = body_of(json::parse(ns::cli::format_batch_success(s)));
  REQUIRE(body["choices"].size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(body["choices"][k]["index"] == k);
    CHECK(body["choices"][k]["logprobs"].is_null());
  }
  CHECK(body["choices"][2]["text"] == "third");
  CHECK(body["choices"][2]["finish_reason"] == "length");
}

TEST_CASE("stored logprobs that cannot be read fail the export with the job named") {
  BatchSuccess s = with_logprobs(BatchEndpoint::chat_completions);
  s.logprobs = "not base64!";
  try {
    ns::cli::format_batch_success(s);
    FAIL("a damaged record was exported");
  } catch (const ns::Error& e) {
    CHECK(std::string(e.what()).find("job 5") != std::string::npos);
  }
}
