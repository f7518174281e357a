#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.h"
#include "tiny_vocab.h"

using tiny::id_of;
using tiny::ids_of;

namespace {

// A BPE vocabulary with special tokens appended after the 256 byte tokens.
struct Special {
  std::string text;
  int32_t type;
};
ns::VocabSpec with_specials(const std::vector<Special>& specials, const std::string& name = "") {
  ns::VocabSpec s = tiny::bpe({}, {"a b"}, "gpt-2");
  s.token_types.assign(256, 1);
  for (const auto& sp : specials) {
    s.tokens.push_back(sp.text);
    s.token_types.push_back(sp.type);
  }
  s.model_name = name;
  return s;
}

}  // namespace

TEST_CASE("control tokens are matched only with parse_special; user-defined ones always") {
  const auto t = ns::Tokenizer::from_spec(with_specials({{"<|im_end|>", 3}, {"<tag>", 4}}));
  const int32_t im_end = id_of(*t, "<|im_end|>");
  const int32_t tag = id_of(*t, "<tag>");

  const auto parsed = t->encode("a<|im_end|>b<tag>", false, true);
  CHECK(parsed == std::vector<int32_t>{'a', im_end, 'b', tag});

  const auto literal = t->encode("a<|im_end|>b<tag>", false, false);
  CHECK(std::find(literal.begin(), literal.end(), im_end) == literal.end());
  CHECK(literal.back() == tag);  // user-defined: matched even without parse_special
  CHECK(t->decode(literal) == "a<|im_end|>b<tag>");

  // Rendering: the control token is hidden unless asked for; user-defined always shows.
  CHECK(t->decode(parsed) == "ab<tag>");
  CHECK(t->decode(parsed, true) == "a<|im_end|>b<tag>");
  CHECK(t->is_control(im_end));
  CHECK_FALSE(t->is_control(tag));
  CHECK(t->token_type(tag) == ns::TokenType::user_defined);
}

TEST_CASE("special tokens are matched longest first, leftmost, without overlap") {
  const auto t = ns::Tokenizer::from_spec(with_specials({{"<x>", 3}, {"<x><y>", 3}, {"y>", 4}}));
  const int32_t x = id_of(*t, "<x>"), xy = id_of(*t, "<x><y>"), y = id_of(*t, "y>");
  CHECK(t->encode("<x><y><x>y>", false, true) == std::vector<int32_t>{xy, x, y});
  // Without parse_special only the user-defined "y>" is split out.
  const auto ids = t->encode("<x><y>", false, false);
  CHECK(ids.back() == y);
  CHECK(std::count(ids.begin(), ids.end(), x) == 0);
}

TEST_CASE("end-of-generation tokens: EOS, EOT and the texts llama.cpp recognises") {
  auto spec = with_specials({{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<|eot_id|>", 3}});
  spec.eos_id = 256;
  const auto t = ns::Tokenizer::from_spec(spec);
  CHECK(t->eos() == 256);
  CHECK(t->is_end_of_generation(256));
  CHECK(t->is_end_of_generation(id_of(*t, "<|im_end|>")));
  CHECK(t->is_end_of_generation(id_of(*t, "<|eot_id|>")));
  CHECK_FALSE(t->is_end_of_generation(id_of(*t, "<|im_start|>")));
  CHECK_FALSE(t->is_end_of_generation('a'));
  CHECK_FALSE(t->is_end_of_generation(-1));
  // The EOT is the lowest-id token with an end-of-turn text.
  CHECK(t->eot() == id_of(*t, "<|endoftext|>"));
  CHECK(t->end_of_generation_ids() == std::vector<int32_t>{256, 258, 259});

  // A token that looks like an end marker is made a control token even if the
  // file says otherwise (llama.cpp does the same and warns).
  const auto u = ns::Tokenizer::from_spec(with_specials({{"<|im_end|>", 1}}));
  CHECK(u->is_control(id_of(*u, "<|im_end|>")));
  CHECK(u->is_end_of_generation(id_of(*u, "<|im_end|>")));

  // DeepSeek's end marker uses fullwidth bars and U+2581.
  const std::string ds_end =
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const auto d = ns::Tokenizer::from_spec(with_specials({{ds_end, 3}}));
  CHECK(d->is_end_of_generation(id_of(*d, ds_end)));
}

TEST_CASE("Kimi K3: generation stops at <|end_of_msg|>, the turn end its GGUF names as EOS") {
  // The reference's conversion/kimi_k3.py writes the config's eos_token_id,
  // <|end_of_msg|>, over the tokenizer's [EOS] (the document end): with [EOS]
  // alone a chat reply would never stop at the end of its turn.
  auto spec = with_specials({{"[EOS]", 3}, {"<|open|>", 3}, {"<|close|>", 3}, {"<|sep|>", 3}, {"<|end_of_msg|>", 3}});
  const int32_t end_of_msg = 260;
  spec.eos_id = end_of_msg;
  const auto t = ns::Tokenizer::from_spec(spec);
  REQUIRE(id_of(*t, "<|end_of_msg|>") == end_of_msg);
  CHECK(t->eos() == end_of_msg);
  CHECK(t->is_end_of_generation(end_of_msg));
  CHECK(t->is_end_of_generation(id_of(*t, "[EOS]")));  // in llama.cpp's end-of-generation texts too
  for (const char* marker : {"<|open|>", "<|close|>", "<|sep|>"}) {
    CAPTURE(marker);
    CHECK_FALSE(t->is_end_of_generation(id_of(*t, marker)));
  }
  CHECK(t->end_of_generation_ids() == std::vector<int32_t>{256, end_of_msg});
  // A rendered turn's markers are single control tokens, and the turn end is hidden in the text.
  const auto ids = t->encode("<|close|>message<|sep|><|end_of_msg|>", false, true);
  CHECK(ids.front() == id_of(*t, "<|close|>"));
  CHECK(ids.back() == end_of_msg);
  CHECK(t->decode(ids) == "message");
}

TEST_CASE("Phi-3: whitespace after special tokens is swallowed (RSTRIP), as llama.cpp does by model name") {
  const auto phi = ns::Tokenizer::from_spec(with_specials({{"<|user|>", 3}, {"<|endoftext|>", 3}}, "Phi3"));
  const int32_t user = id_of(*phi, "<|user|>");
  CHECK(phi->encode("<|user|>  \n a", false, true) == std::vector<int32_t>{user, 'a'});
  const int32_t eot = id_of(*phi, "<|endoftext|>");
  // "<|endoftext|>" is exempt: its following space is kept (spelled 'Ġ', then 'a').
  CHECK(phi->encode("<|endoftext|> a", false, true) == std::vector<int32_t>{eot, ' ', 'a'});
  const auto other = ns::Tokenizer::from_spec(with_specials({{"<|user|>", 3}}, "SomethingElse"));
  CHECK(other->encode("<|user|>  a", false, true).size() > 2);
}

TEST_CASE("token ids outside the vocabulary are rejected") {
  const auto t = ns::Tokenizer::from_spec(tiny::bpe({}, {"a b"}));
  for (int32_t bad : {-1, 256, 1 << 30}) {
    CHECK_THROWS_AS(t->token_to_piece(bad), ns::Error);
    CHECK_THROWS_AS(t->token_text(bad), ns::Error);
    CHECK_THROWS_AS(t->decode(std::vector<int32_t>{bad}), ns::Error);
  }
  CHECK(t->find_token("nope") == -1);
}
