#include <doctest/doctest.h>

#include "tiny_vocab.h"

using tiny::id_of;
using tiny::ids_of;

namespace {
const std::string S = "\xE2\x96\x81";  // U+2581, SentencePiece's space
}

TEST_CASE("SPM merges the highest-scoring pair first") {
  // "ab" -> "▁ab": pairs "▁a" and "ab" compete; "▁ab" itself is not a token.
  {
    const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a", "b", S + "a", "ab"}, {-5, -5, -5, -1, -2}));
    CHECK(t->encode("ab", false, false) == ids_of(*t, {S + "a", "b"}));
  }
  {
    const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a", "b", S + "a", "ab"}, {-5, -5, -5, -2, -1}));
    CHECK(t->encode("ab", false, false) == ids_of(*t, {S, "ab"}));
  }
  {  // equal scores: leftmost pair first
    const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a", "b", S + "a", "ab"}, {-5, -5, -5, -1, -1}));
    CHECK(t->encode("ab", false, false) == ids_of(*t, {S + "a", "b"}));
  }
}

TEST_CASE("SPM escapes spaces, adds the space prefix, and BOS when asked") {
  const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a", "b", S + "a", S + "b"}, {-5, -5, -5, -1, -1}));
  CHECK(t->encode("a b", false, false) == ids_of(*t, {S + "a", S + "b"}));
  CHECK(t->add_bos());
  CHECK(t->bos() == 1);
  CHECK(t->eos() == 2);
  CHECK(t->unk() == 0);
  const auto with_bos = t->encode("a b", true, false);
  CHECK(with_bos.front() == 1);
  CHECK(t->encode("", true, false) == std::vector<int32_t>{1});
  CHECK(t->encode("", false, false).empty());

  auto spec = tiny::spm({S, "a", "b", S + "a", S + "b"}, {-5, -5, -5, -1, -1});
  spec.add_space_prefix = false;
  const auto no_prefix = ns::Tokenizer::from_spec(spec);
  CHECK(no_prefix->encode("a b", false, false) == ids_of(*no_prefix, {"a", S + "b"}));
}

TEST_CASE("SPM byte fallback for characters outside the vocabulary, <unk> without byte tokens") {
  const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a"}, {-1, -1}));
  // "é" = C3 A9 is not a piece: it becomes <0xC3> <0xA9>.
  CHECK(t->encode("a\xC3\xA9", false, false) == ids_of(*t, {S, "a", "<0xC3>", "<0xA9>"}));
  CHECK(t->token_to_piece(ids_of(*t, {"<0xC3>"})[0]) == "\xC3");
  CHECK(t->decode(t->encode("a\xC3\xA9", false, false)) == "a\xC3\xA9");

  const auto no_bytes = ns::Tokenizer::from_spec(tiny::spm({S, "a"}, {-1, -1}, /*with_bytes=*/false));
  CHECK(no_bytes->encode("a\xC3\xA9", false, false) ==
        std::vector<int32_t>{id_of(*no_bytes, S), id_of(*no_bytes, "a"), 0, 0});
}

TEST_CASE("SPM decode removes the prefix space like llama.cpp") {
  const auto t = ns::Tokenizer::from_spec(tiny::spm({S, "a", "b", S + "a", S + "b"}, {-5, -5, -5, -1, -1}));
  const auto ids = t->encode("a b", false, false);
  CHECK(t->decode(ids) == "a b");
  CHECK(t->token_to_piece(ids[0]) == " a");
  // A leading BOS takes the removal (llama.cpp strips only the first token).
  CHECK(t->decode(t->encode("a b", true, false)) == " a b");
  ns::DecodeOptions keep;
  keep.strip_leading_space = false;
  CHECK(t->decode_with(ids, keep) == " a b");
  // Control tokens render only on request.
  CHECK(t->token_to_piece(1).empty());
  CHECK(t->token_to_piece(1, true) == "<s>");
  CHECK(t->decode(std::vector<int32_t>{1, ids[0]}, true) == "<s> a");
}
