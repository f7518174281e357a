// Ling's own chat template (the Bailing V3 template: the reference's
// models/templates/inclusionai-ling-3.0-flash.jinja, not in this repository)
// through the Jinja engine: every conversation of
// ../shared/chat-templates/conversations.json, add_generation_prompt true and
// false, must give the bytes Python jinja2 gave (ling_jinja_expected.json,
// written by ling_jinja_expected.py beside this file). The template is read
// from the reference's checkout (NS_REF_TEMPLATES_DIR, default
// /var/tmp/ns-reference/llama.cpp/models/templates, as make_goldens.sh builds
// it); the test skips with a message where it or ../shared is absent.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat/jinja.h"
#include "tests/unit/chat/template_files.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

TEST_CASE("ling: the Bailing V3 chat template renders through the Jinja engine as jinja2 does") {
  const char* env = std::getenv("NS_REF_TEMPLATES_DIR");
  const fs::path tpath =
      fs::path(env ? env : "/var/tmp/ns-reference/llama.cpp/models/templates") / "inclusionai-ling-3.0-flash.jinja";
  const fs::path cpath = fs::path(NS_SHARED_DIR) / "chat-templates/conversations.json";
  if (!fs::exists(tpath) || !fs::exists(cpath)) {
    MESSAGE("skipped: " << tpath << " or " << cpath
                        << " is absent (tests/conformance/reference/build_reference.sh checks the reference out)");
    return;
  }
  const std::string source = ns::test::read_file(tpath);
  const ordered_json conversations = ordered_json::parse(ns::test::read_file(cpath));
  const ordered_json expected =
      ordered_json::parse(ns::test::read_file(fs::path(NS_SOURCE_DIR) / "tests/unit/chat/ling_jinja_expected.json"));
  REQUIRE(expected.size() == 2 * conversations.size());
  for (const auto& c : expected) {
    const std::string name = c.at("conversation").get<std::string>();
    const bool agp = c.at("add_generation_prompt").get<bool>();
    CAPTURE(name);
    CAPTURE(agp);
    const ordered_json* conversation = nullptr;
    for (const auto& x : conversations)
      if (x.at("name") == name) conversation = &x;
    REQUIRE_MESSAGE(conversation, "no conversation " << name << " in " << cpath);
    const ordered_json* tools = conversation->contains("tools") ? &conversation->at("tools") : nullptr;
    REQUIRE(c.contains("output"));  // this template raises on none of them
    CHECK(ns::chat::jinja::render_chat_template(source, conversation->at("messages"), tools, agp, "<s>", "</s>",
                                                ns::test::rendered_at()) == c.at("output").get<std::string>());
  }
}
