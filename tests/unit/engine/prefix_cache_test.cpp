// PrefixCache (engine/batch/prefix_cache.h) on its own: a snapshot holds exactly
// its producer's state (attention rows, recurrent state, sliding rings), the
// plan picks the longest shared part (an entry, or a prompt of the batch, ready
// at once or filled by a prefill), waiters keep entries from eviction, eviction
// is least recently used, a dropped entry gives its rows back. The batch's end
// to end behaviour with sharing is in prefix_sharing_test.cpp.
#include <doctest/doctest.h>

#include <vector>

#include "engine/model/model.h"
#include "engine/batch/prefix_cache.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

using Tokens = std::vector<int32_t>;

Tokens joined(const Tokens& head, size_t n, const Tokens& tail) {
  Tokens t(head.begin(), head.begin() + static_cast<long>(n));
  t.insert(t.end(), tail.begin(), tail.end());
  return t;
}

void feed(Model& m, int32_t seq, const Tokens& t, int64_t from, int64_t to, std::vector<float>& logits) {
  std::vector<BatchToken> batch;
  for (int64_t p = from; p < to; ++p)
    batch.push_back({t[static_cast<size_t>(p)], seq, static_cast<int32_t>(p), p + 1 == to});
  m.forward_batch(batch, logits);
}

}  // namespace

TEST_CASE("a snapshot holds exactly its producer's state: the next token's logits are equal bit for bit") {
  for (const std::string& path : {test::moe_model(), test::kimi_linear_model(), test::gpt_oss_model()}) {
    CAPTURE(path);
    auto m = Model::load(path, {.engine = {.context = 256, .max_sequences = 2, .prefix_cache = 1}});
    const Tokens a = test::some_tokens(m->n_vocab(), 60);
    const Tokens joiner = joined(a, 40, test::some_tokens(m->n_vocab(), 20, 5));
    REQUIRE(m->reserve_rows(0, 64));
    REQUIRE(m->reserve_rows(1, 64));
    PrefixCache cache(*m);
    REQUIRE(cache.available());
    // `a` has fed nothing yet: its prefill fills the entry, the joiner waits for it.
    const PrefixCache::User producer{a, 0, false, -1, -1, 0};
    const PrefixCache::Plan plan = cache.plan(joiner, {&producer, 1});
    REQUIRE(plan.make >= 0);
    CHECK(plan.maker == 0);
    CHECK(plan.use == plan.make);
    CHECK(cache.len(plan.make) == 32);  // 40 shared, down to a block, at most the joiner's length - 1
    CHECK_FALSE(cache.ready(plan.make));
    CHECK_FALSE(cache.evict());  // a filling entry is never evicted
    std::vector<float> logits, own, copied;
    feed(*m, 0, a, 0, 32, logits);
    cache.snapshot(plan.make, 0);
    CHECK(cache.ready(plan.make));
    CHECK(cache.copy(plan.use, 1) == 32);
    feed(*m, 0, a, 32, 33, own);
    feed(*m, 1, a, 32, 33, copied);
    CHECK(own == copied);
    CHECK(cache.entries() == 1);
  }
}

TEST_CASE("plan: too short to share, an entry by its tokens, a prompt of the batch ready at once") {
  auto m = Model::load(test::moe_model(), {.engine = {.context = 256, .max_sequences = 2, .prefix_cache = 2}});
  const int64_t V = m->n_vocab();
  const Tokens a = test::some_tokens(V, 64);
  REQUIRE(m->reserve_rows(0, 64));  // a's rows (the forward passes that would fill them do not matter here)
  PrefixCache cache(*m);
  // A prompt of 32 tokens can share at most 16 (its last token is computed): below kMin.
  const PrefixCache::User whole_a{a, 64, true, -1, -1, 0};
  CHECK(cache.plan(Tokens(a.begin(), a.begin() + 32), {&whole_a, 1}).use == -1);
  CHECK(cache.entries() == 0);
  // Attention rows only and `a` holds them: the entry is ready at once, nothing fills it.
  const PrefixCache::Plan p = cache.plan(joined(a, 50, test::some_tokens(V, 10, 3)), {&whole_a, 1});
  REQUIRE(p.use >= 0);
  CHECK(p.make == -1);
  CHECK(cache.ready(p.use));
  CHECK(cache.len(p.use) == 48);
  // Another joiner finds it by its tokens; a prompt that begins otherwise does not.
  CHECK(cache.plan(joined(a, 49, test::some_tokens(V, 20, 9)), {}).use == p.use);
  CHECK(cache.plan(test::some_tokens(V, 64, 1), {}).use == -1);
  // Two waiters keep it; once both left it is idle and evicted.
  CHECK_FALSE(cache.evict());
  cache.leave(p.use);
  CHECK_FALSE(cache.evict());
  cache.leave(p.use);
  CHECK(cache.evict());
  CHECK(cache.entries() == 0);
}

TEST_CASE("eviction: a slot wanted takes the least recently used idle entry; drop gives the rows back") {
  auto m = Model::load(test::moe_model(), {.engine = {.context = 256, .max_sequences = 1, .prefix_cache = 2}});
  const int64_t V = m->n_vocab();
  const Tokens p1 = test::some_tokens(V, 64, 1), p2 = test::some_tokens(V, 64, 2), p3 = test::some_tokens(V, 64, 3);
  REQUIRE(m->reserve_rows(0, 64));
  const int64_t free_before = m->sequence_state().largest_free();
  PrefixCache cache(*m);
  auto share = [&](const Tokens& p) {  // p's batch neighbour holds p: an entry of 48 at once
    const PrefixCache::User holder{p, 64, true, -1, -1, 0};
    const int e = cache.plan(p, {&holder, 1}).use;
    REQUIRE(e >= 0);
    cache.leave(e);
    return e;
  };
  const int e1 = share(p1), e2 = share(p2);
  CHECK(e1 != e2);
  CHECK(m->sequence_state().largest_free() < free_before);
  const int again = cache.plan(p1, {}).use;  // p1 is used again: p2 is now the least recent
  CHECK(again == e1);
  cache.leave(again);
  CHECK(share(p3) == e2);
  CHECK(cache.plan(p2, {}).use == -1);
  const int kept = cache.plan(p1, {}).use;
  CHECK(kept == e1);
  cache.leave(kept);
  cache.drop(e1);
  cache.drop(e2);
  CHECK(cache.entries() == 0);
  CHECK(m->sequence_state().largest_free() == free_before);
}
