// Round trips through the real vocabularies in ../shared/vocab (skipped where
// absent): 4-byte characters, invalid UTF-8 and random bytes must survive
// encode + lossless decode, without crashes or out-of-bounds reads. SPM keeps
// invalid bytes (byte fallback); byte-level BPE gives U+FFFD for each, as llama.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/utf8.h"
#include "tiny_vocab.h"

namespace fs = std::filesystem;

namespace {

std::unique_ptr<ns::Tokenizer> shared_vocab(const std::string& name) {
  const fs::path p = fs::path(NS_SHARED_DIR) / "vocab" / ("ggml-vocab-" + name + ".gguf");
  if (!fs::exists(p)) return nullptr;
  const auto file = ns::gguf::GgufFile::open(p.string());
  return ns::Tokenizer::from_gguf(*file);
}

const std::vector<std::string> kTricky = {
    "\xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 llama rocket",  // 4-byte characters
    "\xF0\x90\x90\x80\xF0\x90\x90\xA8",               // Deseret letters (4-byte, \p{L})
    "\xC3",                                           // truncated sequence at the very end
    "abc\xF0\x9F\xA6",                                // truncated 4-byte sequence
    "\x80\x80\xBF",                                   // stray continuation bytes
    "\xFF\xFE\xFD hello",                             // bytes that never occur in UTF-8
    "\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80",           // overlong, surrogate, above U+10FFFF
    std::string("nul\0inside", 10),
    "  leading and trailing  \n\n",
    "\xC2\x85\xE3\x80\x80\xC2\xA0 unusual spaces",
};

}  // namespace

TEST_CASE("tricky and invalid UTF-8 round-trips through every shared vocabulary") {
  int tested = 0;
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "deepseek-llm", "falcon", "starcoder"}) {
    const bool spm = std::string(name) == "llama-spm" || std::string(name) == "phi-3";
    const auto expected = [&](const std::string& s) { return spm ? s : ns::tok::utf8_sanitize(s); };
    const auto t = shared_vocab(name);
    if (!t) continue;
    ++tested;
    CAPTURE(std::string(name));
    ns::DecodeOptions lossless;
    lossless.clean_spaces = false;
    for (const std::string& s : kTricky) {
      CAPTURE(s);
      const auto ids = t->encode(s, false, false);
      for (int32_t id : ids) REQUIRE((id >= 0 && id < t->n_vocab()));
      CHECK(t->decode_with(ids, lossless) == expected(s));
    }
    // Falcon's and StarCoder's vocabularies have no token for some bytes
    // (Falcon: a few ASCII control characters); llama.cpp drops those bytes,
    // and so do we, so the random texts avoid them.
    std::vector<char> bytes;
    for (int b = 0; b < 256; ++b)
      if (spm || t->find_token(ns::tok::byte_to_unicode(static_cast<uint8_t>(b))) >= 0)
        bytes.push_back(static_cast<char>(b));
    std::mt19937 rng(7);
    for (int iter = 0; iter < 200; ++iter) {
      std::string s(1 + rng() % 24, '\0');
      for (char& c : s) c = rng() % 3 == 0 ? bytes[rng() % bytes.size()] : "aZ 9.\n\xC3\xA9\xE4\xB8\xAD"[rng() % 12];
      CAPTURE(s);
      CHECK(t->decode_with(t->encode(s, false, false), lossless) == expected(s));
    }
  }
  if (tested == 0) MESSAGE("skipped: no vocabularies under " << NS_SHARED_DIR << "/vocab");
}

TEST_CASE("a 4-byte character through a tiny vocabulary: bytes, then a merged token") {
  const std::string llama = "\xF0\x9F\xA6\x99";
  std::string spelled;
  ns::tok::append_byte_encoded(spelled, llama);  // four byte characters
  const std::string b0 = ns::tok::byte_to_unicode(0xF0), b1 = ns::tok::byte_to_unicode(0x9F);
  const std::string b2 = ns::tok::byte_to_unicode(0xA6), b3 = ns::tok::byte_to_unicode(0x99);
  const auto t = ns::Tokenizer::from_spec(
      tiny::bpe({b0 + b1, b2 + b3, spelled}, {b0 + " " + b1, b2 + " " + b3, b0 + b1 + " " + b2 + b3}));
  const auto ids = t->encode(llama, false, false);
  CHECK(ids == std::vector<int32_t>{tiny::id_of(*t, spelled)});
  CHECK(t->token_to_piece(ids[0]) == llama);
  // Half a character decodes to its raw bytes; the pieces concatenate back.
  CHECK(t->token_to_piece(256) == "\xF0\x9F");
  CHECK(t->token_to_piece(256) + t->token_to_piece(257) == llama);
}

TEST_CASE("a 100 KB document tokenizes well under a second") {
  const auto t = shared_vocab("deepseek-llm");
  if (!t) {
    MESSAGE("skipped: deepseek-llm vocabulary absent");
    return;
  }
  const std::string chunk =
      "The quick brown fox jumps over the lazy dog. Z\xC3\xBCrich, \xE6\x9D\xB1\xE4\xBA\xAC, and S\xC3\xA3o Paulo: "
      "42 cities; x = 3.14159 * r**2 // area\nint main(void) {\n    return 0;\n}\n \xF0\x9F\xA6\x99\t\t \n";
  std::string doc;
  while (doc.size() < 100 * 1024) doc += chunk;
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = t->encode(doc, true, true);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("100 KB -> " << ids.size() << " tokens in " << ms << " ms");
  CHECK(ms < 1000.0);
  ns::DecodeOptions lossless;
  lossless.clean_spaces = false;
  CHECK(t->decode_with(std::vector<int32_t>(ids.begin() + 1, ids.end()), lossless) == doc);
}
