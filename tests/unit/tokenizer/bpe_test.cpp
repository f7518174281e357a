#include <doctest/doctest.h>

#include "common/error.h"
#include "tiny_vocab.h"

using tiny::ids_of;

TEST_CASE("BPE applies merges by rank, lowest first") {
  {
    const auto t = ns::Tokenizer::from_spec(tiny::bpe({"ab", "bc"}, {"a b", "b c"}));
    CHECK(t->encode("abc", false, false) == ids_of(*t, {"ab", "c"}));
  }
  {
    const auto t = ns::Tokenizer::from_spec(tiny::bpe({"ab", "bc"}, {"b c", "a b"}));
    CHECK(t->encode("abc", false, false) == ids_of(*t, {"a", "bc"}));
  }
  {  // merges chain into longer tokens
    const auto t = ns::Tokenizer::from_spec(tiny::bpe({"ab", "abc"}, {"a b", "ab c"}));
    CHECK(t->encode("abc", false, false) == ids_of(*t, {"abc"}));
    CHECK(t->encode("abcab", false, false) == ids_of(*t, {"abc", "ab"}));
  }
}

TEST_CASE("BPE breaks rank ties leftmost first") {
  const auto t = ns::Tokenizer::from_spec(tiny::bpe({"aa"}, {"a a"}));
  CHECK(t->encode("aaa", false, false) == ids_of(*t, {"aa", "a"}));
  CHECK(t->encode("aaaa", false, false) == ids_of(*t, {"aa", "aa"}));
}

TEST_CASE("BPE merges only inside pre-tokenizer words, on the byte-level spelling") {
  // ' ' is spelled 'Ġ'; "Ġa" exists but merges never cross the word boundary before " a".
  const auto t = ns::Tokenizer::from_spec(tiny::bpe({"\xC4\xA0"
                                                     "a",
                                                     "ba"},
                                                    {"\xC4\xA0 a", "b a"}));
  CHECK(t->encode("b a", false, false) == ids_of(*t, {"b",
                                                      "\xC4\xA0"
                                                      "a"}));
  CHECK(t->encode("ba", false, false) == ids_of(*t, {"ba"}));
  // Invalid UTF-8 becomes U+FFFD (EF BF BD), one per bad byte, as in llama.cpp.
  const std::string raw = "\xFF\x80 \xC3";
  const auto ids = t->encode(raw, false, false);
  CHECK(ids == std::vector<int32_t>{0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, ' ', 0xEF, 0xBF, 0xBD});
  CHECK(t->decode(ids) == "\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD");
}

TEST_CASE("BPE drops a byte whose byte-level character has no token (llama.cpp does too)") {
  ns::VocabSpec spec = tiny::bpe({}, {"a b"});
  spec.tokens[1] = "[no byte 1]";  // Falcon's vocabulary lacks a few control bytes like this
  const auto t = ns::Tokenizer::from_spec(spec);
  CHECK(t->encode("a\x01"
                  "b",
                  false, false) == std::vector<int32_t>{'a', 'b'});
}

TEST_CASE("Llama-3 style ignore_merges: a word that is a token is taken whole") {
  // "xyz" is a token but no merges lead to it.
  const auto llama3 = ns::Tokenizer::from_spec(tiny::bpe({"xyz"}, {"a b"}, "llama-bpe"));
  CHECK(llama3->encode("xyz", false, false) == ids_of(*llama3, {"xyz"}));
  const auto gpt2 = ns::Tokenizer::from_spec(tiny::bpe({"xyz"}, {"a b"}, "gpt-2"));
  CHECK(gpt2->encode("xyz", false, false) == ids_of(*gpt2, {"x", "y", "z"}));
}

TEST_CASE("kimi-k2 may have no merges: then every byte is its own token") {
  // llama.cpp accepts a kimi-k2 vocabulary without tokenizer.ggml.merges and
  // then finds no merge rank for any pair: each character of the byte-level
  // spelling (one per byte) is looked up on its own.
  const std::string e_acute = "\xC3\x83\xC2\xA9";  // byte-level spelling of U+00E9 (bytes C3 A9)
  const auto t = ns::Tokenizer::from_spec(tiny::bpe({"ab", e_acute}, {}, "kimi-k2"));
  CHECK(t->encode("ab", false, false) == std::vector<int32_t>{'a', 'b'});  // "ab" is a token, but nothing merges
  CHECK(t->encode("\xC3\xA9", false, false) == std::vector<int32_t>{0xC3, 0xA9});
  // With merges, kimi-k2 merges inside its words as any BPE vocabulary does.
  const auto merged = ns::Tokenizer::from_spec(tiny::bpe({"ab", e_acute}, {"a b", "\xC3\x83 \xC2\xA9"}, "kimi-k2"));
  CHECK(merged->encode("ab\xC3\xA9", false, false) == ids_of(*merged, {"ab", e_acute}));
  // Other pre-tokenizers still need their merges (see the errors below).
}

TEST_CASE("BPE vocabulary errors name the problem") {
  auto expect_bad_model = [](const ns::VocabSpec& spec, const std::string& needle) {
    try {
      ns::Tokenizer::from_spec(spec);
      FAIL("expected an error mentioning " << needle);
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::bad_model);
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect_bad_model(tiny::bpe({}, {}), "tokenizer.ggml.merges");
  expect_bad_model(tiny::bpe({}, {"a b"}, "unheard-of"), "unheard-of");
  auto dup = tiny::bpe({"a"}, {"a b"});
  expect_bad_model(dup, "duplicate");
  auto wrong_model = tiny::bpe({}, {"a b"});
  wrong_model.model = "t5";
  expect_bad_model(wrong_model, "tokenizer.ggml.model 't5'");
  auto bos_missing = tiny::bpe({}, {"a b"});
  bos_missing.add_bos = true;
  bos_missing.bos_id = 100000;    // out of range: ignored, so no BOS is known
  bos_missing.tokens.resize(11);  // and the default id 11 is out of range too
  expect_bad_model(bos_missing, "add_bos_token");
}

TEST_CASE("BPE decode undoes the byte-level spelling; clean_spaces follows the pre-tokenizer") {
  const auto gpt2 = ns::Tokenizer::from_spec(tiny::bpe({}, {"a b"}, "gpt-2"));
  const auto ids = gpt2->encode("Hi , you 're", false, false);
  CHECK(gpt2->decode(ids) == "Hi, you're");  // what llama.cpp prints for gpt-2 vocabularies
  ns::DecodeOptions raw;
  raw.clean_spaces = false;
  CHECK(gpt2->decode_with(ids, raw) == "Hi , you 're");
  const auto coder = ns::Tokenizer::from_spec(tiny::bpe({}, {"a b"}, "deepseek-coder"));
  CHECK(coder->decode(coder->encode("Hi , you 're", false, false)) == "Hi , you 're");
  const auto kimi = ns::Tokenizer::from_spec(tiny::bpe({}, {}, "kimi-k2"));
  CHECK(kimi->decode(kimi->encode("Hi , you 're", false, false)) == "Hi , you 're");
  CHECK(gpt2->token_to_piece(' ') == " ");
  CHECK(gpt2->token_text(' ') == "\xC4\xA0");
}
