// Families nightshift renders after a model's own Jinja template (kimi-k3,
// qwen3.5, glm-4.5, ...) are checked against prompts Python jinja2 rendered
// from that template: tests/unit/chat/<name>_vectors.json, written by the
// <name>_vectors.py beside it, as {"cases": [{"name", "messages":
// [{"role", "content"}], "add_generation_prompt", "expected"}]}.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"

namespace ns::test {

inline nlohmann::json load_jinja_vectors(const std::string& file) {
  const std::string path = std::string(NS_SOURCE_DIR) + "/tests/unit/chat/" + file;
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return nlohmann::json::parse(in);
}

inline std::vector<chat::ChatMessage> vector_messages(const nlohmann::json& c) {
  std::vector<chat::ChatMessage> messages;
  for (const auto& m : c.at("messages"))
    messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return messages;
}

// Every case renders to its expected prompt, by family value and by name;
// `cases`: how many the file must hold (a truncated file fails).
inline void check_jinja_vectors(const std::string& file, chat::ChatTemplate family, const std::string& name,
                                size_t cases) {
  const nlohmann::json vectors = load_jinja_vectors(file);
  REQUIRE(vectors.at("cases").size() == cases);
  for (const auto& c : vectors.at("cases")) {
    const bool add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    CAPTURE(c.at("name").get<std::string>());
    CAPTURE(add_generation_prompt);
    const std::vector<chat::ChatMessage> messages = vector_messages(c);
    CHECK(chat::render_chat(family, messages, add_generation_prompt) == c.at("expected").get<std::string>());
    CHECK(chat::render_chat(name, messages, add_generation_prompt) == c.at("expected").get<std::string>());
  }
}

}  // namespace ns::test
