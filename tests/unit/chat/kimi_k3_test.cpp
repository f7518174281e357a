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
#include "engine/util/error.h"

using ns::chat::ChatMessage;
using ns::chat::ChatTemplate;
using ns::chat::render_chat;

namespace {

nlohmann::json load_vectors() {
  const std::string path = std::string(NS_SOURCE_DIR) + "/tests/unit/chat/kimi_k3_vectors.json";
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("kimi-k3 renders every conversation exactly as Kimi K3's Jinja template does") {
  const nlohmann::json vectors = load_vectors();
  const auto& cases = vectors.at("cases");
  REQUIRE(cases.size() == 10);
  for (const auto& c : cases) {
    const bool add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    CAPTURE(c.at("name").get<std::string>());
    CAPTURE(add_generation_prompt);
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages"))
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    CHECK(render_chat(ChatTemplate::kimi_k3, messages, add_generation_prompt) == c.at("expected").get<std::string>());
    CHECK(render_chat("kimi-k3", messages, add_generation_prompt) == c.at("expected").get<std::string>());
  }
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
