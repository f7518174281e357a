// kimi-k2 conformance against the reference's own outputs, recorded in
// tokenizer_kimi_k2.json (its "about" says how they were made): for every
// text, the pre-tokenizer's words must be the reference splitter's, and the
// ids must be llama_tokenize's with the generator's built-in vocabulary
// relabelled kimi-k2 (nightshift-make-model --vocab-pre kimi-k2), with its
// merges and without them (a kimi-k2 vocabulary may lack tokenizer.ggml.merges).
// The texts leave out letters and digits newer than Unicode 14 (see "about"):
// there nightshift's PCRE2-based character classes and the reference differ,
// for every pre-tokenizer alike.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace fs = std::filesystem;

namespace {

struct Case {
  std::string text;
  std::vector<std::string> words;
  std::vector<int32_t> ids, ids_no_merges;
};

std::vector<Case> read_cases() {
  const fs::path path = fs::path(NS_SOURCE_DIR) / "tests/conformance/tokenizer_kimi_k2.json";
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot open " << path);
  const nlohmann::json doc = nlohmann::json::parse(f);
  std::vector<Case> cases;
  for (const auto& c : doc.at("cases")) {
    Case k;
    if (c.contains("text_hex")) {
      const std::string hex = c.at("text_hex");
      for (size_t i = 0; i + 1 < hex.size(); i += 2)
        k.text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    } else {
      k.text = c.at("text");
    }
    k.words = c.at("words").get<std::vector<std::string>>();
    k.ids = c.at("ids").get<std::vector<int32_t>>();
    k.ids_no_merges = c.at("ids_no_merges").get<std::vector<int32_t>>();
    cases.push_back(std::move(k));
  }
  return cases;
}

// The generator's built-in vocabulary with tokenizer.ggml.pre = kimi-k2, as
// the reference read it.
ns::VocabSpec generated_kimi_vocabulary() {
  const std::string tool = std::string(NS_BINARY_DIR) + "/tools/nightshift-make-model";
  REQUIRE_MESSAGE(fs::exists(tool), "build the nightshift-make-model target: " << tool);
  const fs::path dir = fs::temp_directory_path() / ("ns-kimi-k2-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "kimi.gguf").string();
  const std::string cmd = tool +
                          " --arch llama --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 32 --type F32"
                          " --vocab-pre kimi-k2 --out " +
                          model + " > " + (dir / "log").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  REQUIRE_MESSAGE(status == 0, cmd);
  ns::VocabSpec spec = ns::VocabSpec::from_gguf(*ns::gguf::GgufFile::open(model));
  fs::remove_all(dir);
  return spec;
}

std::string show(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += "[" + w + "]";
  return s;
}

}  // namespace

TEST_CASE("kimi-k2 splits every recorded text into the reference's words") {
  const auto cases = read_cases();
  CHECK(cases.size() > 500);
  const ns::tok::PreTokenizer pre(ns::tok::PreType::kimi_k2);
  std::vector<ns::tok::WordSpan> spans;
  for (const Case& c : cases) {
    // The reference splits the decoded text: invalid bytes are U+FFFD by then.
    const std::string text = ns::tok::utf8_sanitize(c.text);
    pre.split(text, spans);
    std::vector<std::string> got;
    for (const auto& [b, e] : spans) got.push_back(text.substr(b, e - b));
    CHECK_MESSAGE(got == c.words, "text: " << c.text << "\nexpected " << show(c.words) << "\ngot      " << show(got));
  }
}

TEST_CASE("kimi-k2 tokenizes every recorded text to the reference's ids, with and without merges") {
  const auto cases = read_cases();
  ns::VocabSpec spec = generated_kimi_vocabulary();
  REQUIRE(spec.pre == "kimi-k2");
  REQUIRE(!spec.merges.empty());
  const auto with_merges = ns::Tokenizer::from_spec(spec);
  spec.merges.clear();
  const auto no_merges = ns::Tokenizer::from_spec(spec);
  int merged_somewhere = 0;
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK(with_merges->encode(c.text, false, false) == c.ids);
    CHECK(no_merges->encode(c.text, false, false) == c.ids_no_merges);
    // kimi-k2 does not clean up spaces, so decoding gives the (sanitized) text back.
    CHECK(with_merges->decode(c.ids) == ns::tok::utf8_sanitize(c.text));
    merged_somewhere += c.ids.size() < c.ids_no_merges.size();
  }
  // The vectors exercise merging (so word boundaries show in the ids).
  CHECK(merged_somewhere > 100);
}
