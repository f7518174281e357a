// gpt-oss rendering (the harmony format) checked against the model's own Jinja
// template: the expected prompts in gpt_oss_vectors.json were rendered by
// Python jinja2 from the reference's models/templates/openai-gpt-oss-120b.jinja
// with its default variables (gpt_oss_vectors.py beside this file writes them
// and says how), with a fixed date where the template writes today's.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "common/error.h"
#include "tests/unit/chat/jinja_vectors.h"

using ns::chat::ChatMessage;
using ns::chat::ChatTemplate;
using ns::chat::render_chat;

namespace {

// Today's UTC date, by <chrono>'s calendar rather than the renderer's gmtime_r and strftime.
std::string utc_today() {
  const std::chrono::year_month_day d{std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now())};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(d.year()), static_cast<unsigned>(d.month()),
                static_cast<unsigned>(d.day()));
  return buf;
}

// The rendered text with today's date put back to the vectors' fixed one.
std::string with_date(std::string text, const std::string& today, const std::string& fixed) {
  const std::string key = "Current date: ";
  const size_t at = text.find(key + today);
  if (at != std::string::npos) text.replace(at + key.size(), today.size(), fixed);
  return text;
}

}  // namespace

TEST_CASE("gpt-oss renders every conversation exactly as gpt-oss's Jinja template does (harmony)") {
  const nlohmann::json vectors = ns::test::load_jinja_vectors("gpt_oss_vectors.json");
  const std::string fixed = vectors.at("date").get<std::string>();
  const auto& cases = vectors.at("cases");
  REQUIRE(cases.size() == 12);
  for (const auto& c : cases) {
    const bool add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    CAPTURE(c.at("name").get<std::string>());
    CAPTURE(add_generation_prompt);
    const std::vector<ChatMessage> messages = ns::test::vector_messages(c);
    // The day is read before and after rendering: a render across midnight carries one of the two.
    const std::string before = utc_today();
    const std::string by_family = render_chat(ChatTemplate::gpt_oss, messages, add_generation_prompt);
    const std::string by_name = render_chat("gpt-oss", messages, add_generation_prompt);
    const std::string after = utc_today();
    const std::string expected = c.at("expected").get<std::string>();
    for (const std::string& got : {by_family, by_name}) {
      const std::string a = with_date(got, before, fixed), b = with_date(got, after, fixed);
      CHECK((a == expected || b == expected));
      CHECK(a != got);  // today's date was in the text
    }
  }
}

TEST_CASE("gpt-oss: the model's template is detected as gpt-oss") {
  const std::string snippet =
      "{{- \"<|start|>system<|message|>\" }}{{- build_system_message() }}{{- \"<|end|>\" }}"
      "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}";
  CHECK(ns::chat::detect_template(snippet) == ChatTemplate::gpt_oss);
  CHECK(ns::chat::detect_family_name(snippet) == "gpt-oss");
}

TEST_CASE("gpt-oss refuses what its template would drop or reject: a later system message, channel markers, tool") {
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::gpt_oss, {{"user", "Hi"}, {"system", "Be brief"}}, true),
                       doctest::Contains("messages[1] is a system message after the first"), ns::Error);
  CHECK_THROWS_WITH_AS(
      render_chat(ChatTemplate::gpt_oss,
                  {{"user", "Hi"}, {"assistant", "<|channel|>analysis<|message|>hmm"}, {"user", "?"}}, true),
      doctest::Contains("messages[1] is an assistant reply with <|channel|> markers"), ns::Error);
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::gpt_oss, {{"user", "Hi"}, {"tool", "42"}}, true),
                       doctest::Contains("which the gpt-oss chat template cannot render"), ns::Error);
  CHECK_THROWS_AS(render_chat(ChatTemplate::gpt_oss, {}, true), ns::Error);
}
