// The Jinja engine against Python jinja2: every template of
// ../shared/chat-templates/templates rendered with every conversation of
// conversations.json, add_generation_prompt true and false, must give the
// bytes expected/NAME.json holds, or an error where jinja2 raised one. The
// data is read in place (see ../shared/chat-templates/README.md for how it was
// rendered); the test skips with a message where ../shared is absent.
#include <doctest/doctest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/chat/jinja.h"
#include "tests/unit/chat/template_files.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

using ns::test::read_file;
std::time_t fixed_now() { return ns::test::rendered_at(); }

// First differing byte, with some context, for a failure message.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  size_t from = k > 40 ? k - 40 : 0;
  return "at byte " + std::to_string(k) + ": got " + ordered_json(got.substr(from, 100)).dump() + ", want " +
         ordered_json(want.substr(from, 100)).dump();
}

}  // namespace

TEST_CASE("jinja conformance: the shared chat templates render as jinja2 does") {
  const fs::path dir = fs::path(NS_SHARED_DIR) / "chat-templates";
  if (!fs::exists(dir / "conversations.json")) {
    MESSAGE("skipped: " << dir << " is absent (the shared conformance data lives beside the repository)");
    return;
  }
  const ordered_json conversations = ordered_json::parse(read_file(dir / "conversations.json"));
  std::vector<fs::path> templates;
  for (const auto& e : fs::directory_iterator(dir / "templates"))
    if (e.path().extension() == ".jinja") templates.push_back(e.path());
  std::sort(templates.begin(), templates.end());
  REQUIRE(!templates.empty());

  size_t total = 0, matched = 0;
  std::vector<std::string> failures;
  for (const fs::path& tpath : templates) {
    const std::string name = tpath.stem().string();
    const fs::path epath = dir / "expected" / (name + ".json");
    REQUIRE_MESSAGE(fs::exists(epath), "no expected outputs for " << name);
    const ordered_json expected = ordered_json::parse(read_file(epath));
    const std::string source = read_file(tpath);
    for (const auto& c : expected) {
      ++total;
      const std::string conv = c.at("conversation").get<std::string>();
      const bool agp = c.at("add_generation_prompt").get<bool>();
      const std::string label = name + " / " + conv + " / add_generation_prompt=" + (agp ? "true" : "false");
      const ordered_json* conversation = nullptr;
      for (const auto& x : conversations)
        if (x.at("name") == conv) conversation = &x;
      REQUIRE_MESSAGE(conversation, "no conversation " << conv);
      const ordered_json* tools = conversation->contains("tools") ? &conversation->at("tools") : nullptr;
      std::string got, error;
      try {
        got = ns::chat::jinja::render_chat_template(source, conversation->at("messages"), tools, agp, "<s>", "</s>",
                                                    fixed_now());
      } catch (const ns::Error& e) {
        error = e.what();
      }
      if (c.contains("error")) {
        if (!error.empty())
          ++matched;
        else
          failures.push_back(label + ": jinja2 raised " + c.at("error").get<std::string>() + ", we rendered");
      } else if (!error.empty()) {
        failures.push_back(label + ": raised " + error);
      } else if (got != c.at("output").get<std::string>()) {
        failures.push_back(label + ": differs " + first_difference(got, c.at("output").get<std::string>()));
      } else {
        ++matched;
      }
    }
  }
  for (const auto& f : failures) MESSAGE(f);
  MESSAGE("jinja conformance: " << matched << " of " << total);
  CHECK(total == templates.size() * 16);
  CHECK(matched == total);
}
