// plan_fit (engine/model/fit_plan.h): what fits, as data. The pure function on
// made-up sizes (every figure exact), then through Model::load on generated models.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "engine/model/fit_plan.h"
#include "engine/model/model.h"
#include "tests/unit/engine/asan_budget.h"
#include "tests/unit/engine/test_models.h"
#include "tests/unit/error_message.h"

using namespace ns;

namespace {

constexpr uint64_t MiB = 1ull << 20;

// Two attending layers of 64 + 64 F16 values a token (512 bytes a token), no experts, no process overhead:
// a plan is the 16 MiB runtime slack + the KV pool + `per_token` bytes of buffers per token of a forward pass.
struct Made {
  Hparams hp;
  FitInputs in;
  explicit Made(uint64_t budget, uint64_t per_token = MiB) {
    hp.n_layer = 2;
    hp.n_ctx_train = 4096;
    in.path = "made.gguf";
    in.hp = &hp;
    in.buffers.cache = SequenceLayout{.k_dim = 64, .v_dim = 64};
    in.activation_bytes = [per_token](int64_t tokens) { return static_cast<uint64_t>(tokens) * per_token; };
    in.context_scratch = [](int64_t, int64_t) { return uint64_t{0}; };
    in.memory_budget = budget;
  }
};

ModelOptions options(int context, int n_seq, int tokens, bool fewer = false) {
  return {.engine = {.context = context,
                     .max_sequences = n_seq,
                     .fewer_sequences = fewer,
                     .max_batch_tokens = tokens,
                     .io_mode = "pread"}};
}

}  // namespace

TEST_CASE("plan_fit: the whole batch at full contexts when the budget holds it") {
  const Made m(1ull << 30);
  const FitPlan p = plan_fit(m.in, options(1024, 4, 64));
  REQUIRE(p.fits);
  CHECK(p.context == 1024);
  CHECK(p.sequences == 4);
  CHECK(p.sequences_asked == 4);
  CHECK(p.kv_tokens == 4 * 1024);
  CHECK(p.prefill_chunk == 64);
  CHECK(p.activation_bytes == 64 * MiB);
  CHECK(p.why.empty());
  CHECK(p.reason.empty());
  REQUIRE(p.budget);
  CHECK(p.budget->kv_cache_bytes == 4 * 1024 * 512);
  CHECK(p.budget->activation_bytes == 64 * MiB);
  CHECK(p.budget->overhead_bytes == 16 * MiB);
  // A decode step takes a token of every sequence: the chunk is never below the sequences.
  CHECK(plan_fit(m.in, options(1024, 100, 64)).prefill_chunk == 100);
}

TEST_CASE("plan_fit: the prefill chunk from what the buffers' own list adds per token of a pass") {
  // 64 KiB more a token over 3 MiB a pass holds at any length: 1 GiB / 20 / 64 KiB = 819 tokens, 768 in
  // multiples of 64. The plan counts it from activation_bytes (ForwardState::for_each_buffer in a load), not
  // from an estimate of its own (which read the hparams: here all 0, a chunk of 1024).
  Made m(1ull << 30);
  m.in.activation_bytes = [](int64_t tokens) { return 3 * MiB + static_cast<uint64_t>(tokens) * (64 << 10); };
  const FitPlan p = plan_fit(m.in, options(1024, 1, 0));
  REQUIRE(p.fits);
  CHECK(p.prefill_chunk == prefill_chunk_tokens(1ull << 30, 64 << 10));
  CHECK(p.prefill_chunk == 768);
  CHECK(p.activation_bytes == 3 * MiB + 768 * (64 << 10));
}

TEST_CASE("plan_fit: a smaller KV pool before fewer sequences") {
  // 8 x 64K tokens is 256 MiB of KV cache; 200 MiB less 64 + 16 leaves room for 120 MiB: 128K tokens.
  const Made m(200 * MiB);
  const FitPlan p = plan_fit(m.in, options(65536, 8, 64, /*fewer=*/true));
  REQUIRE(p.fits);
  CHECK(p.sequences == 8);
  CHECK(p.kv_tokens == 131072);
  REQUIRE(p.why.size() == 2);
  CHECK(p.why[0] == "a KV pool of 524288 tokens does not fit the memory budget; trying 262144");
  CHECK(p.why[1] == "a KV pool of 262144 tokens does not fit the memory budget; trying 131072");
  CHECK(test::contains(p.reason, "is too small to run made.gguf"));  // the 262144 tokens' refusal
  REQUIRE(p.budget);
  CHECK(p.budget->planned_bytes() <= 200 * MiB);
  CHECK(test::contains(p.budget->kv_cache_note, "a pool of 131072 tokens shared by 8 sequences of at most 65536"));

  // kv_tokens set: that pool or nothing, never halved.
  ModelOptions fixed = options(65536, 8, 64);
  fixed.engine.kv_tokens = 262144;
  const FitPlan f = plan_fit(m.in, fixed);
  CHECK_FALSE(f.fits);
  CHECK(f.why.empty());
}

TEST_CASE("plan_fit: fewer sequences when each one's buffers do not fit, only when allowed") {
  // One token per forward pass and sequence, 8 MiB of buffers a token: 16 sequences need 128 MiB.
  const Made m(100 * MiB, 8 * MiB);
  const FitPlan p = plan_fit(m.in, options(1024, 16, 1, /*fewer=*/true));
  REQUIRE(p.fits);
  CHECK(p.sequences == 8);
  CHECK(p.sequences_asked == 16);
  CHECK(p.kv_tokens == 8 * 1024);
  CHECK(p.prefill_chunk == 8);
  REQUIRE_FALSE(p.why.empty());
  CHECK(p.why.back() == "a batch of 16 sequences does not fit even with the smallest KV pool; trying 8");
  CHECK(test::contains(p.reason, "memory_budget 100.00 MiB is too small to run made.gguf"));

  const FitPlan exact = plan_fit(m.in, options(1024, 16, 1));
  CHECK_FALSE(exact.fits);
  CHECK(exact.sequences == 0);
}

TEST_CASE("plan_fit: nothing fits: the reason names the smallest budget that would") {
  // The smallest candidate: 1 sequence, a pool of 1024 tokens (512 KiB), 8 MiB of buffers, 16 MiB of slack.
  const Made m(10 * MiB, 8 * MiB);
  const FitPlan p = plan_fit(m.in, options(4096, 4, 1, /*fewer=*/true));
  CHECK_FALSE(p.fits);
  CHECK(test::contains(p.reason, "memory_budget 10.00 MiB is too small to run made.gguf: it needs 24.50 MiB"));
  CHECK(test::contains(p.reason, "Set memory_budget to at least 25MiB"));
  CHECK(std::find(p.why.begin(), p.why.end(),
                  "a batch of 2 sequences does not fit even with the smallest KV pool; trying 1") != p.why.end());
  CHECK(p.why.back() == "a KV pool of 2048 tokens does not fit the memory budget; trying 1024");

  // Under an address-space limit, the KV cache and buffers must be mappable too (io_mode mmap: no budget).
  Made as(1ull << 30);
  as.in.address_space = stream::AddressSpace{.limit = 100 * MiB, .mapped = 90 * MiB};
  ModelOptions mmap = options(1024, 1, 64);
  mmap.engine.io_mode = "mmap";
  const FitPlan a = plan_fit(as.in, mmap);
  CHECK_FALSE(a.fits);
  CHECK(test::contains(a.reason,
                       "made.gguf: a context of 1024 tokens for 1 sequence(s), 64 tokens a forward pass, "
                       "does not fit in memory: its KV cache (512.00 KiB, 1024 tokens) and buffers"));
  CHECK(test::contains(a.reason, "this process may map 10.00 MiB more (ulimit -v 100.00 MiB)"));
}

// The same through Model::load (plan only) on a generated MoE model: what Engine::load, the daemon and
// `model info` get.
TEST_CASE("plan_fit on a generated model: whole, fewer sequences, nothing") {
  const auto load = [](uint64_t budget, int n_seq, int tokens, bool fewer, int64_t kv_tokens = 0) {
    return Model::load(test::moe_model(), {.engine = {.context = 256,
                                                      .max_sequences = n_seq,
                                                      .fewer_sequences = fewer,
                                                      .max_batch_tokens = tokens,
                                                      .kv_tokens = kv_tokens,
                                                      .memory_budget = budget,
                                                      .io_mode = "pread"},
                                           .plan_only = true});
  };
  const auto whole = load(test::with_asan_rss(512 * MiB), 4, 0, false);
  CHECK(whole->fit().fits);
  CHECK(whole->fit().sequences == 4);
  CHECK(whole->n_seq() == 4);
  CHECK(whole->fit().kv_tokens == 4 * 256);
  CHECK(whole->sequence_state().pool_rows() == 4 * 256);
  CHECK(whole->max_batch_tokens() == whole->fit().prefill_chunk);
  CHECK(whole->fit().why.empty());
  // The plan's activations are what the load allocated.
  CHECK(whole->fit().activation_bytes == forward_state_bytes(whole->forward_state()) + whole->batch_list_bytes());

  // Many sequences of one token a pass sharing a pool of 16384 tokens: their buffers (4 KiB a token), not
  // the pool, are what does not fit. The budget sits halfway between what 16384 and 8192 sequences need
  // (the process's RSS, which the plan counts, moves by far less than that).
  uint64_t need_big = 0, need_half = 0;
  {
    need_big = load(64ull << 30, 16384, 1, false, 16384)->streaming().plan.minimum_budget;
    need_half = load(64ull << 30, 8192, 1, false, 16384)->streaming().plan.minimum_budget;
  }
  REQUIRE(need_big > need_half + 16 * MiB);
  const uint64_t between = need_half + (need_big - need_half) / 2;
  const auto fewer = load(between, 16384, 1, true, 16384);
  CHECK(fewer->fit().sequences == 8192);
  CHECK(fewer->fit().sequences_asked == 16384);
  CHECK(fewer->n_seq() == 8192);
  CHECK(test::contains(fewer->fit().reason, "is too small to run"));
  test::expect_error(
      ErrorKind::invalid_input, [&] { load(between, 16384, 1, false, 16384); },
      "16384 sequences were planned in a budget that holds 8192");

  const std::string none = test::expect_error(
      ErrorKind::invalid_input, [&] { load(1 * MiB, 4, 0, true); }, "a model was planned in 1 MiB");
  CHECK(test::contains(none, "memory_budget 1.00 MiB is too small to run"));
  CHECK(test::contains(none, "Set memory_budget to at least"));
}
