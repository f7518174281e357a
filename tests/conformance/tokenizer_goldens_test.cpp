// The prompt token ids in ../shared/models/goldens/*.json (llama.cpp, BOS
// added as the model's add_bos_token says) must be what encode(prompt,
// add_special=true, parse_special=true) gives with the vocabulary carried in
// each model file's own metadata.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

TEST_CASE("golden prompts tokenize to the reference prompt_tokens") {
  const fs::path dir = fs::path(NS_SHARED_DIR) / "models" / "goldens";
  if (!fs::is_directory(dir)) {
    MESSAGE("skipped: " << dir << " is absent");
    return;
  }
  std::vector<fs::path> goldens;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") goldens.push_back(e.path());
  std::sort(goldens.begin(), goldens.end());
  CHECK(!goldens.empty());

  for (const fs::path& g : goldens) {
    CAPTURE(g.filename().string());
    std::ifstream f(g);
    const nlohmann::json runs = nlohmann::json::parse(f);
    REQUIRE(runs.is_array());
    REQUIRE(!runs.empty());
    const fs::path model = fs::path(NS_SHARED_DIR) / "models" / runs[0].at("model").get<std::string>();
    if (!fs::exists(model)) {
      MESSAGE(model << " is absent, skipped");
      continue;
    }
    const auto file = ns::gguf::GgufFile::open(model.string());
    const auto tok = ns::Tokenizer::from_gguf(*file);
    for (const auto& run : runs) {
      const std::string prompt = run.at("prompt").get<std::string>();
      const auto expected = run.at("prompt_tokens").get<std::vector<int32_t>>();
      CAPTURE(prompt);
      CHECK(tok->encode(prompt, true, true) == expected);
      if (tok->add_bos()) CHECK(expected.front() == tok->bos());
    }
  }
}
