// Tokenizer conformance against llama.cpp's test vectors: for every
// ../shared/vocab/ggml-vocab-*.gguf, each string of its .inp (separated by
// lines "__ggml_vocab_test__") must encode, with add_special=false and
// parse_special=false as llama.cpp's test-tokenizer-0 does, to the ids on the
// matching line of its .out. Decoding is checked to give the string back,
// except where llama.cpp's own detokenizer changes it (clean_spaces).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open " << p);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Splits like llama.cpp's read_tests: a trailing separator ends the list.
std::vector<std::string> read_inputs(const fs::path& p) {
  const std::string raw = read_file(p);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE_MESSAGE(f.good(), "cannot open " << p);
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(f, line);) {
    std::istringstream ss(line);
    std::vector<int32_t> ids;
    for (int32_t id; ss >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Where llama.cpp's clean_spaces detokenizer changes text (see tokenizer.h).
bool clean_up_changes(const std::string& s) {
  for (const char* p : {" ?", " !", " .", " ,", " ' ", " 's", " 'm", " 're", " 've"})
    if (s.find(p) != std::string::npos) return true;
  return false;
}

std::vector<fs::path> vocab_files() {
  const fs::path dir = fs::path(NS_SHARED_DIR) / "vocab";
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) == 0 && e.path().extension() == ".gguf") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("every vocabulary's test strings tokenize to llama.cpp's ids and decode back") {
  const auto files = vocab_files();
  if (files.empty()) {
    MESSAGE("skipped: no ggml-vocab-*.gguf under " << NS_SHARED_DIR << "/vocab");
    return;
  }
  for (const fs::path& path : files) {
    const std::string name = path.filename().string();
    CAPTURE(name);
    const fs::path inp = path.string() + ".inp", outp = path.string() + ".out";
    if (!fs::exists(inp) || !fs::exists(outp)) {
      MESSAGE("no .inp/.out beside " << name << ", skipped");
      continue;
    }
    const auto file = ns::gguf::GgufFile::open(path.string());
    const auto tok = ns::Tokenizer::from_gguf(*file);
    const auto inputs = read_inputs(inp);
    const auto expected = read_outputs(outp);
    REQUIRE_MESSAGE(inputs.size() == expected.size(),
                    name << ": .inp has " << inputs.size() << " strings, .out " << expected.size() << " lines");
    CHECK(inputs.size() > 10);

    const bool cleans = tok->decode(std::vector<int32_t>{tok->encode("a ,", false, false)}) == "a,";
    int exceptions = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string& s = inputs[i];
      CAPTURE(i);
      CAPTURE(s);
      const std::vector<int32_t> got = tok->encode(s, false, false);
      CHECK_MESSAGE(got == expected[i], "expected [" << show(expected[i]) << "] got [" << show(got) << "]");

      ns::DecodeOptions lossless;
      lossless.clean_spaces = false;
      CHECK(tok->decode_with(got, lossless) == s);
      if (cleans && clean_up_changes(s)) {
        ++exceptions;  // llama.cpp's detokenizer does not give these back either
        CHECK(tok->decode(got) != s);
      } else {
        CHECK(tok->decode(got) == s);
      }
    }
    MESSAGE(name << ": " << inputs.size() << " strings; " << exceptions
                 << " do not round-trip through decode() because of clean_spaces, as in llama.cpp");
  }
}
