// The chat templates of the 2026 families that only the reference's checkout
// has (its models/templates/, not in this repository or in ../shared's set:
// the list below, the same as reference_templates.py's) through the Jinja
// engine: every conversation of ../shared/chat-templates/conversations.json,
// add_generation_prompt true and false, must give the bytes Python jinja2 gave
// (reference_templates/NAME.json, written by reference_templates.py beside
// this file). Templates are read from the reference's checkout
// (NS_REF_TEMPLATES_DIR, default /var/tmp/ns-reference/llama.cpp/models/templates,
// as make_goldens.sh builds it); a case skips with a message where it or
// ../shared is absent.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat/jinja.h"
#include "tests/unit/chat/template_files.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

void check_template(const std::string& name) {
  const char* env = std::getenv("NS_REF_TEMPLATES_DIR");
  const fs::path tpath = fs::path(env ? env : "/var/tmp/ns-reference/llama.cpp/models/templates") / (name + ".jinja");
  const fs::path cpath = fs::path(NS_SHARED_DIR) / "chat-templates/conversations.json";
  if (!fs::exists(tpath) || !fs::exists(cpath)) {
    MESSAGE("skipped: " << tpath << " or " << cpath
                        << " is absent (tests/conformance/reference/build_reference.sh checks the reference out)");
    return;
  }
  const std::string source = ns::test::read_file(tpath);
  const ordered_json conversations = ordered_json::parse(ns::test::read_file(cpath));
  const ordered_json expected = ordered_json::parse(
      ns::test::read_file(fs::path(NS_SOURCE_DIR) / "tests/unit/chat/reference_templates" / (name + ".json")));
  REQUIRE(expected.size() == 2 * conversations.size());
  for (const auto& c : expected) {
    const std::string conversation_name = c.at("conversation").get<std::string>();
    const bool agp = c.at("add_generation_prompt").get<bool>();
    CAPTURE(name);
    CAPTURE(conversation_name);
    CAPTURE(agp);
    const ordered_json* conversation = nullptr;
    for (const auto& x : conversations)
      if (x.at("name") == conversation_name) conversation = &x;
    REQUIRE_MESSAGE(conversation, "no conversation " << conversation_name << " in " << cpath);
    const ordered_json* tools = conversation->contains("tools") ? &conversation->at("tools") : nullptr;
    REQUIRE(c.contains("output"));  // these templates raise on none of them
    CHECK(ns::chat::jinja::render_chat_template(source, conversation->at("messages"), tools, agp, "<s>", "</s>",
                                                ns::test::rendered_at()) == c.at("output").get<std::string>());
  }
}

}  // namespace

TEST_CASE("reference templates: Ling's Bailing V3 (bailingmoe2, bailingmoe3) renders as jinja2 does") {
  check_template("inclusionai-ling-3.0-flash");
}

TEST_CASE("reference templates: DeepSeek V4-Flash (deepseek4) renders as jinja2 does") {
  check_template("deepseek-ai-DeepSeek-V4-Flash-0731");
}

TEST_CASE("reference templates: GLM-4.7-Flash (glm4moe, glm-dsa) renders as jinja2 does") {
  check_template("GLM-4.7-Flash");
}

TEST_CASE("reference templates: MiniMax-M3 (minimax-m2's successor) renders as jinja2 does") {
  check_template("MiniMax-M3");
}
