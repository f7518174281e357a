// Long contexts (docs/long-context.md): the KV pool shared by a batch's
// sequences, admission by the jobs' actual lengths, the plan that sizes the
// pool within the budget, and documents that keep their tail.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "engine/model/model.h"
#include "engine/state/sequence_state.h"
#include "common/error.h"
#include "tests/unit/error_message.h"
#include "tests/unit/engine/asan_budget.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {
SamplingParams greedy(int n, float temperature = 0, uint64_t seed = 1) {
  return {.max_tokens = n, .temperature = temperature, .seed = seed, .ignore_eos = true};
}
}  // namespace

TEST_CASE("SequenceState pool: first-fit ranges, no overlap, neighbours merge on release") {
  SequenceLayout layout{.k_dim = 2, .v_dim = 1, .attends = {1, 1}};
  SequenceState st(2, 4, 80, layout, 1, true, /*pool_rows=*/100);
  REQUIRE(st.pooled());
  CHECK(st.pool_rows() == 100);
  CHECK(st.attention_bytes() == 100u * 2u * (2u + 1u) * 2u);  // pool x layers x (k + v) x F16
  CHECK(st.largest_free() == 100);
  CHECK(st.reserve(0, 40));
  CHECK(st.reserve(1, 30));
  CHECK(st.reserve(2, 30));
  CHECK(st.largest_free() == 0);
  CHECK_FALSE(st.reserve(3, 1));  // nothing free: the state is unchanged
  CHECK(st.seq_rows(3) == 0);
  // Every row of each sequence is its own, in every layer.
  for (int64_t seq = 0; seq < 3; ++seq)
    for (int64_t il = 0; il < 2; ++il)
      for (int64_t pos = 0; pos < st.seq_rows(seq); ++pos)
        st.k(il, seq, pos)[0] = static_cast<uint16_t>(1000 * il + 100 * seq + pos);
  for (int64_t seq = 0; seq < 3; ++seq)
    for (int64_t il = 0; il < 2; ++il)
      for (int64_t pos = 0; pos < st.seq_rows(seq); ++pos) CHECK(st.k(il, seq, pos)[0] == 1000 * il + 100 * seq + pos);
  st.release(1);
  CHECK(st.largest_free() == 30);
  CHECK_FALSE(st.reserve(3, 31));
  st.release(0);  // merges with sequence 1's old range: 70 side by side
  CHECK(st.largest_free() == 70);
  CHECK(st.free_ranges() == std::vector<int64_t>{70});
  CHECK(st.reserve(3, 70));
  st.release(2);
  st.release(3);
  CHECK(st.free_ranges() == std::vector<int64_t>{100});
  CHECK_THROWS_AS(st.reserve(0, 81), Error);  // longer than the context

  // The fixed layout (the default): every sequence owns its context, reserve never waits.
  SequenceState fixed(2, 4, 64, layout);
  CHECK_FALSE(fixed.pooled());
  CHECK(fixed.pool_rows() == 4 * 64);
  CHECK(fixed.reserve(2, 64));
  CHECK(fixed.seq_rows(3) == 64);
}

TEST_CASE("the memory plan halves the KV pool, not the batch, until it fits the budget") {
  const ModelOptions mo{.engine = {.context = 1 << 20,  // 64 x 1M tokens x 256 bytes: 16 GiB asked of 512 MiB
                                   .max_sequences = 64,
                                   .max_batch_tokens = 64,
                                   .memory_budget = test::with_asan_rss(512ull << 20),
                                   .io_mode = "pread"},
                        .plan_only = true};
  auto m = Model::load(test::moe_model(), mo);
  const SequenceState& st = m->sequence_state();
  CHECK(m->n_seq() == 64);
  CHECK(m->n_ctx() == 1 << 20);
  REQUIRE(st.pooled());
  CHECK(st.pool_rows() < 64 * (1 << 20));
  CHECK(st.pool_rows() >= kMinPoolRows);
  CHECK(m->streaming().plan.planned_bytes() <= mo.engine.memory_budget);
  // Halving stopped at the first pool that fits: twice as much would not have.
  CHECK(m->streaming().plan.memory_budget - m->streaming().plan.fixed_bytes() <
        st.bytes_per_token() * static_cast<uint64_t>(st.pool_rows()) + 2 * m->streaming().plan.slot_bytes);
  MESSAGE("pool " << st.pool_rows() << " tokens of " << 64 * (1 << 20) << " asked");

  // The trade-off the plan reports: pairs of max_batch x context within the same room.
  const auto t = stream::kv_tradeoff(m->streaming().plan, st.bytes_per_token(), 0, {4096, 65536});
  REQUIRE(t.size() == 2);
  CHECK(t[0].max_batch >= 16 * t[1].max_batch);
  CHECK(t[0].kv_tokens >= st.pool_rows());
}

TEST_CASE("a shared KV pool: short and long requests by their actual lengths, each getting the tokens it gets alone") {
  // kv_tokens: 4 x 96 would be 384: a pool that holds some of them at a time, and less than one context.
  auto e = Engine::load(test::moe_model(), {.context = 96, .max_sequences = 4, .kv_tokens = 80});
  const std::vector<std::string> prompts = {"Once upon a time", "Hi", "A much longer prompt that needs several tokens",
                                            "x", "The queue runner wakes up at night and"};
  const std::vector<int> lengths = {60, 5, 30, 8, 55};
  std::vector<GenerationResult> alone;
  for (size_t i = 0; i < prompts.size(); ++i)
    alone.push_back(e->generate(prompts[i], greedy(lengths[i], i % 2 ? 0.8f : 0.0f, 100 + i)));

  auto batch = e->open_batch();
  std::vector<GenerationResult> together(prompts.size());
  std::map<int, size_t> index;
  size_t next = 0;
  int waited = 0, max_active = 0;
  for (;;) {
    while (next < prompts.size() && batch->free_slots() > 0) {
      const int h =
          batch->add({prompts[next], greedy(lengths[next], next % 2 ? 0.8f : 0.0f, 100 + next), {}, {}, {}, {}});
      if (h == GenerationBatch::kNoRoom) {
        ++waited;
        CHECK(batch->refused_rows() > batch->largest_free_rows());
        break;
      }
      index[h] = next++;
    }
    max_active = std::max(max_active, batch->active());
    const bool more = batch->step();
    for (auto& [h, r] : batch->take_finished()) together[index[h]] = std::move(r);
    if (!more && next == prompts.size()) break;
  }
  CHECK(waited > 0);       // the pool, not the slots, held a request back
  CHECK(max_active >= 2);  // short ones ran beside long ones
  for (size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(together[i].tokens == alone[i].tokens);
    CHECK(together[i].finish_reason == alone[i].finish_reason);
  }

  // More than the pool can ever hold: this request's error, naming the lengths and the fix.
  const std::string what = test::expect_error(
      ErrorKind::invalid_input, [&] { e->generate("Hi", greedy(90)); },
      "a request larger than the KV pool was accepted");
  CHECK(test::contains(what, "max_tokens 90"));
  CHECK(test::contains(what, "holds 80 tokens"));
  CHECK(test::contains(what, "raise memory_budget"));
}

TEST_CASE("a prompt longer than the context fails naming the lengths; a document keeps its tail") {
  auto e = Engine::load(test::moe_model(), {.context = 64});
  std::string doc;
  for (int i = 0; i < 40; ++i) doc += "word" + std::to_string(i) + " ";
  const std::string what = test::expect_error(
      ErrorKind::invalid_input, [&] { e->generate(doc, greedy(8)); }, "a prompt longer than the context was accepted");
  CHECK(test::contains(what, "but the context holds 64"));
  CHECK(test::contains(what, "raise `context`"));
  auto batch = e->open_batch();
  GenerationRequest r{doc, greedy(8), {}, {}, {}, {}};
  r.keep_tail = true;
  batch->add(std::move(r));
  while (batch->step()) {
  }
  auto done = batch->take_finished();
  REQUIRE(done.size() == 1);
  const GenerationResult& g = done[0].second;
  CHECK(g.finish_reason == "length");
  CHECK(g.tokens.size() == 8);
  CHECK(g.prompt_tokens_dropped > 0);
  CHECK(g.stats.prompt_tokens + 8 <= 64);  // room left for max_tokens

  // The tail kept is the text's end after its BOS: greedy over exactly those tokens gives the same continuation.
  const auto m = Model::load(test::moe_model(), {.engine = {.context = 64}});
  const Tokenizer& tok = m->tokenizer();
  const std::vector<int32_t> all = tok.encode(doc, true, true);
  REQUIRE(static_cast<int32_t>(all.size()) == g.stats.prompt_tokens + g.prompt_tokens_dropped);
  const size_t head = tok.add_bos() && all[0] == tok.bos() ? 1 : 0;
  std::vector<int32_t> kept(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(head));
  kept.insert(kept.end(), all.begin() + static_cast<std::ptrdiff_t>(head) + g.prompt_tokens_dropped, all.end());
  std::vector<float> logits;
  m->forward(kept, 0, false, logits);
  std::vector<int32_t> greedy_tokens;
  for (int i = 0; i < 8; ++i) {
    const int32_t id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    greedy_tokens.push_back(id);
    const int32_t one[1] = {id};
    m->forward(one, static_cast<int64_t>(kept.size()) + i, false, logits);
  }
  CHECK(greedy_tokens == g.tokens);
}
