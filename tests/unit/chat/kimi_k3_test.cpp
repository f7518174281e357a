// Kimi K3 rendering checked against the model's own Jinja template: the
// expected prompts in kimi_k3_vectors.json were rendered by Python jinja2 from
// the reference's models/templates/Kimi-K3.jinja with its default variables
// (kimi_k3_vectors.py beside this file writes them and says how).
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

TEST_CASE("kimi-k3 renders every conversation exactly as Kimi K3's Jinja template does") {
  ns::test::check_jinja_vectors("kimi_k3_vectors.json", ChatTemplate::kimi_k3, "kimi-k3", 10);
}

TEST_CASE("kimi-k3: the generation prompt opens the assistant's think section") {
  const std::vector<ChatMessage> user = {{"user", "Hi"}};
  const std::string without = render_chat(ChatTemplate::kimi_k3, user, false);
  CHECK(without.ends_with("<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>"));
  CHECK(render_chat(ChatTemplate::kimi_k3, user, true) ==
        without + "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>");
}

TEST_CASE("kimi-k3 rejects tool messages: the template needs a tool name a ChatMessage does not carry") {
  const std::vector<ChatMessage> tool = {{"user", "Hi"}, {"tool", "42"}};
  CHECK_THROWS_WITH_AS(
      render_chat(ChatTemplate::kimi_k3, tool, true),
      doctest::Contains("messages[1] has role \"tool\", which the kimi-k3 chat template cannot render"), ns::Error);
  CHECK_THROWS_AS(render_chat(ChatTemplate::kimi_k3, {}, true), ns::Error);
}
