// The token matcher: byte acceptance, and the trie-walk mask against the scalar reference
// (each token's bytes fed to a copy of the state) over whole real vocabularies.
#include <doctest/doctest.h>

#include <filesystem>

#include "engine/gguf/gguf_file.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "engine/tokenizer/tokenizer.h"

using namespace ns::grammar;

namespace {

std::unique_ptr<ns::Tokenizer> shared_vocab(const std::string& name) {
  const auto p = std::filesystem::path(NS_SHARED_DIR) / "vocab" / ("ggml-vocab-" + name + ".gguf");
  if (!std::filesystem::exists(p)) return nullptr;
  return ns::Tokenizer::from_gguf(*ns::gguf::GgufFile::open(p.string()));
}

const char* kSchema = R"({"type":"object","properties":{
  "title":{"type":"string","maxLength":40},
  "year":{"type":"integer"},
  "score":{"type":"number"},
  "tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":3},
  "ok":{"type":"boolean"}},
  "required":["title","year"],"additionalProperties":false})";

// Prefixes of a valid output: the states the masks are compared in.
const char* kPrefixes[] = {
    "",
    "{",
    "{\"",
    "{\"title\": \"",
    "{\"title\": \"Caf\xC3",
    "{\"title\": \"a\\",
    "{\"title\": \"a\\u00",
    "{\"title\":\"x\",\"year\":",
    "{\"title\":\"x\",\"year\":19",
    "{\"title\":\"x\",\"year\":-",
    "{\"title\":\"x\",\"year\":1,\"score\":1.",
    "{\"title\":\"x\",\"year\":1,\"tags\":[\"gr",
    "{\"title\":\"x\",\"year\":1,\"tags\":[\"red\",",
    "{\"title\":\"x\",\"year\":1}",
};

void compare_masks(const ns::Tokenizer& tok, const Grammar& g, const char* const* prefixes, size_t n) {
  const auto trie = TokenTrie::from_tokenizer(tok);
  MaskScratch kept;  // carried from state to state, as MaskCache does
  for (size_t i = 0; i < n; ++i) {
    Matcher m(g);
    REQUIRE_MESSAGE(m.accept_bytes(prefixes[i]), prefixes[i]);
    TokenMask fast, ref;
    m.token_mask(*trie, fast);
    m.token_mask_reference(*trie, ref);
    size_t allowed = 0;
    for (int32_t id = 0; id < trie->n_vocab(); ++id) allowed += mask_has(ref, id);
    INFO("prefix " << prefixes[i] << ": " << allowed << " tokens allowed");
    CHECK(fast == ref);
    TokenMask warm;
    m.token_mask(*trie, warm, kept);
    CHECK(warm == ref);
    if (std::string_view(prefixes[i]).ends_with("}")) {
      for (const int32_t id : trie->end_of_generation()) CHECK(mask_has(fast, id));
      CHECK(allowed == trie->end_of_generation().size());  // nothing may follow the closed object
    } else {
      CHECK(allowed > 0);
      for (const int32_t id : trie->end_of_generation()) CHECK_FALSE(mask_has(fast, id));
    }
  }
}

}  // namespace

TEST_CASE("matcher: accept, reject, complete, can_continue") {
  const Grammar g = parse_gbnf("root ::= \"ab\" \"c\"?");
  Matcher m(g);
  CHECK_FALSE(m.complete());
  CHECK_FALSE(m.accept_bytes("ax"));
  CHECK(m.accept_bytes("a"));  // a rejected string leaves the state as it was
  CHECK(m.accept_bytes("b"));
  CHECK(m.complete());
  CHECK(m.can_continue());
  CHECK(m.accept_bytes("c"));
  CHECK(m.complete());
  CHECK_FALSE(m.can_continue());
  CHECK_FALSE(m.accept_bytes("c"));
}

TEST_CASE("matcher: a hand-made vocabulary's mask, token kinds and the cache") {
  const Grammar g = parse_gbnf("root ::= \"{\" [a-z]* \"}\"");
  TokenTrie trie({"{", "{a", "ab", "b}", "}", "x}", "", "<eos>", "<ctl>", "{", "a", "A"},
                 {TokenKind::normal, TokenKind::normal, TokenKind::normal, TokenKind::normal, TokenKind::normal,
                  TokenKind::normal, TokenKind::normal, TokenKind::end_of_generation, TokenKind::excluded,
                  TokenKind::normal, TokenKind::normal, TokenKind::normal});
  Matcher m(g);
  TokenMask mask, ref;
  m.token_mask(trie, mask);
  m.token_mask_reference(trie, ref);
  CHECK(mask == ref);
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < trie.n_vocab(); ++id)
    if (mask_has(mask, id)) allowed.push_back(id);
  CHECK(allowed == std::vector<int32_t>{0, 1, 9});  // both "{" tokens and "{a"; not the empty piece
  REQUIRE(m.accept_bytes("{a"));
  m.token_mask(trie, mask);
  allowed.clear();
  for (int32_t id = 0; id < trie.n_vocab(); ++id)
    if (mask_has(mask, id)) allowed.push_back(id);
  CHECK(allowed == std::vector<int32_t>{2, 3, 4, 5, 10});
  REQUIRE(m.accept_bytes("}"));
  m.token_mask(trie, mask);
  allowed.clear();
  for (int32_t id = 0; id < trie.n_vocab(); ++id)
    if (mask_has(mask, id)) allowed.push_back(id);
  CHECK(allowed == std::vector<int32_t>{7});  // only end-of-generation
  MaskCache cache(2);
  Matcher a(g), b(g);
  CHECK(cache.mask(a, trie) == cache.mask(b, trie));
  CHECK(cache.misses() == 1);
  CHECK(cache.hits() == 1);
  REQUIRE(a.accept_bytes("{"));
  REQUIRE(b.accept_bytes("{ab"));  // "{" [a-z]* : the same state as "{"
  cache.mask(a, trie);
  cache.mask(b, trie);
  CHECK(cache.misses() == 2);
  REQUIRE(a.accept_bytes("}"));
  TokenMask direct;
  a.token_mask(trie, direct);
  CHECK(cache.mask(a, trie) == direct);  // a third state: the full cache starts over
}

TEST_CASE("matcher: trie masks equal the scalar reference on real vocabularies") {
  const Grammar g = parse_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
  int tested = 0;
  for (const char* name : {"qwen2", "llama-spm", "gpt-2"}) {
    const auto tok = shared_vocab(name);
    if (!tok) continue;
    INFO("vocabulary " << name);
    compare_masks(*tok, g, kPrefixes, std::size(kPrefixes));
    ++tested;
  }
  if (tested == 0) MESSAGE("skipped: no vocabularies under " << NS_SHARED_DIR << "/vocab");
}
