// The step loop's units on their own (the batch's end to end figures are in
// batch_stats_test.cpp, its grammars in constrained_test.cpp):
// request_accounting.h shares a step among its sequences (whole bytes that
// sum to the step's, the rest in proportion, decode time per decoded token),
// fills a request's ratios and merges n choices' stats; grammar_cache.h
// parses a text once and masks exactly the tokens its matcher forbids.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/model/model.h"
#include "engine/batch/request_accounting.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

TEST_CASE("attribute: a step's bytes in whole bytes summing to the step's, the rest by tokens") {
  BatchStepStats st;
  st.tokens = 7;
  st.sequences = 2;
  st.decode_tokens = 2;
  st.bytes_read = 100;
  st.seconds = 1.0;
  st.io_wait_s = 0.7;
  st.compute_s = 0.3;
  st.read_busy_s = 0.35;
  st.experts_cached = 5;
  st.experts_read = 3;
  st.prefetch_reads = 4;
  st.prefetch_used = 2;
  RequestShare a, b;
  const std::vector<RequestShare*> shares = {&a, nullptr, &b};
  const std::vector<int32_t> tokens = {3, 0, 4}, decoded = {1, 0, 1};
  attribute(st, shares, tokens, decoded);
  CHECK(a.bytes == 43);  // 300 / 7 = 42, and the one byte left over goes to the first
  CHECK(b.bytes == 57);  // 400 / 7
  CHECK(a.bytes + b.bytes == st.bytes_read);
  CHECK(a.io_wait_s == doctest::Approx(0.3));
  CHECK(b.compute_s == doctest::Approx(0.3 * 4 / 7));
  CHECK(a.read_busy_s + b.read_busy_s == doctest::Approx(st.read_busy_s));
  CHECK(a.decode_share_s == doctest::Approx(0.5));
  CHECK(b.decode_share_s == doctest::Approx(0.5));
  CHECK(a.steps == 1);
  CHECK(a.batch_sum == 2);
  CHECK(a.hits == 5);
  CHECK(a.lookups == 8);

  GenerationStats gs;
  a.prefetch_used = 9;  // a prefetch read in one step used in the next: capped at 1
  a.fill(gs, /*decoding=*/false, 10, 0);
  CHECK(gs.bytes_read == 43);
  CHECK(gs.cache_hit_rate == doctest::Approx(5.0 / 8));
  CHECK(gs.prefetch_accuracy == 1.0);
  CHECK(gs.avg_batch_size == 2.0);
  CHECK(gs.batch_steps == 1);
  CHECK(gs.decode_ms == 0);  // never decoded: its whole time is prefill
  CHECK(gs.decode_tok_s == 0);
}

TEST_CASE("merge_choice_stats: the prompt once, tokens and shares summed, times the longest") {
  std::vector<GenerationResult> r(3);
  for (int c = 0; c < 3; ++c) {
    GenerationStats& s = r[static_cast<size_t>(c)].stats;
    s.prompt_tokens = 10;
    s.completion_tokens = 4 + c;
    s.bytes_read = 1000;
    s.io_wait_ms = 1;
    s.decode_ms = 100.0 * (c + 1);
    s.decode_tok_s = 40;  // 4, 8 and 12 tokens decoded
    s.batch_steps = 5 + c;
  }
  merge_choice_stats(r, /*read_busy_s=*/0.5);
  const GenerationStats& s = r[0].stats;
  CHECK(s.prompt_tokens == 10);
  CHECK(s.completion_tokens == 15);
  CHECK(s.bytes_read == 3000);
  CHECK(s.io_wait_ms == 3);
  CHECK(s.decode_ms == 300);
  CHECK(s.batch_steps == 7);
  CHECK(s.decode_tok_s == doctest::Approx(24 * 1000.0 / 300));
  CHECK(s.read_gib_s == doctest::Approx(3000 / 0.5 / double(1ull << 30)));
}

TEST_CASE("GrammarCache: one parse per text, and the mask is the matcher's") {
  auto m = Model::load(test::dense_model(), {.engine = {.context = 64}});
  const Tokenizer& tok = m->tokenizer();
  grammar::GrammarCache cache;
  const auto g = cache.get(R"(root ::= "{" [a-z ]* "}")", tok);
  CHECK(cache.get(R"(root ::= "{" [a-z ]* "}")", tok) == g);
  CHECK(cache.get(R"(root ::= "[" [0-9]* "]")", tok) != g);
  CHECK_THROWS_AS(cache.get("root ::= [a-", tok), Error);
  grammar::Matcher matcher(g->g);
  REQUIRE(matcher.accept_bytes("{ab"));
  const int64_t n_vocab = m->n_vocab();
  std::vector<float> logits(static_cast<size_t>(n_vocab), 1.0f);
  REQUIRE(cache.constrain(*g, matcher, logits.data(), n_vocab));
  const auto trie = grammar::TokenTrie::from_tokenizer(tok);
  grammar::TokenMask reference;
  matcher.token_mask_reference(*trie, reference);
  int allowed = 0;
  for (int64_t id = 0; id < n_vocab; ++id) {
    const bool ok = id < trie->n_vocab() && grammar::mask_has(reference, static_cast<int32_t>(id));
    CHECK(std::isfinite(logits[static_cast<size_t>(id)]) == ok);
    allowed += ok;
  }
  CHECK(allowed > 0);
  CHECK(cache.seconds() >= 0);
}
