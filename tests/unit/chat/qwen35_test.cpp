// Qwen 3.5 rendering checked against the model's own Jinja template: the
// expected prompts in qwen35_vectors.json were rendered by Python jinja2 from
// the reference's models/templates/Qwen3.5-4B.jinja with thinking on
// (qwen35_vectors.py beside this file writes them and says how).
#include <doctest/doctest.h>

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

TEST_CASE("qwen3.5 renders every conversation exactly as Qwen 3.5's Jinja template does") {
  ns::test::check_jinja_vectors("qwen35_vectors.json", ChatTemplate::qwen35, "qwen3.5", 12);
}

TEST_CASE("qwen3.5: the template's own errors, with what to do") {
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::qwen35, {{"user", "Hi"}, {"system", "late"}}, true),
                       doctest::Contains("messages[1] is a system message"), ns::Error);
  CHECK_THROWS_WITH_AS(render_chat(ChatTemplate::qwen35, {{"system", "s"}, {"tool", "42"}}, true),
                       doctest::Contains("needs a user message"), ns::Error);
}

TEST_CASE("qwen3.5 is detected from Qwen 3.5's template; Qwen 3's stays chatml") {
  // The markers the detection reads, as they appear in the two templates' sources.
  const std::string qwen35 =
      "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
      "<|im_start|>... '<tool_call>\\n<function=' ... '\\n<tool_response>\\n' ..."
      "{{- '<|im_start|>assistant\\n' }}{{- '<think>\\n' }}";
  CHECK(ns::chat::detect_family_name(qwen35) == "qwen3.5");
  const std::string qwen3 =
      "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
      "<|im_start|>... <tool_call> ... '\\n<tool_response>\\n' ..."
      "{{- '<think>\\n\\n</think>\\n\\n' }}";
  CHECK(ns::chat::detect_family_name(qwen3) == "chatml");
}
