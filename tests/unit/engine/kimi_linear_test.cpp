// kimi-linear specifics: the sequence state's layout (attention rows only for
// the MLA layers, a fixed recurrent state for the KDA layers) and its reset
// when a sequence starts over. Logits against the reference are in
// tests/conformance (generated-model goldens); batched = alone and resume in
// engine_test.cpp, prefill = token by token in forward_test.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/model/model.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

TEST_CASE("kimi-linear: attention cache rows for the MLA layers only, a fixed recurrent state for the KDA layers") {
  auto m = Model::load(test::kimi_linear_model(), {.engine = {.context = 32, .max_sequences = 3}});
  const SequenceState& st = m->sequence_state();
  CHECK(m->hparams().head_count_kv(0) == 0);  // K M K M
  CHECK(m->hparams().head_count_kv(1) == 1);
  CHECK(st.n_attention_layers() == 2);
  CHECK(st.n_recurrent_layers() == 2);
  // MLA latent: kv_lora 32 + rope 16 F16 values per token and MLA layer.
  CHECK(st.bytes_per_token() == 2u * (32u + 16u) * 2u);
  // KDA: q, k, v conv inputs (3 taps kept of 4) over d_inner = 2 * 32, and 2 heads of 32 x 32, in F32.
  CHECK(st.recurrent_bytes_per_sequence() == 2u * (3u * 3u * 64u + 2u * 32u * 32u) * 4u);
  CHECK(st.bytes() == 3u * 32u * st.bytes_per_token() + 3u * st.recurrent_bytes_per_sequence());
}

TEST_CASE("kimi-linear: a sequence that starts over at position 0 starts from zero state") {
  auto m = Model::load(test::kimi_linear_model(), {.engine = {.context = 32, .max_batch_tokens = 8}});
  const std::vector<int32_t> a = {5, 77, 123, 9, 300}, b = {41, 42, 43, 44, 45, 46};
  test::check_restart_is_fresh(*m, a, b);
  // Continuing instead of restarting depends on the history: position 5 after a differs from after b.
  std::vector<float> first, other, after_a, after_b;
  const int32_t next[1] = {7};
  m->forward(a, 0, false, first);
  m->forward(next, 5, false, after_a);
  m->forward(b, 0, false, other);
  m->forward(std::span<const int32_t>(next, 1), 6, false, after_b);
  CHECK(after_a != after_b);
  for (float v : after_a) REQUIRE(std::isfinite(v));
}

TEST_CASE("kimi-linear: a model whose layers all attend keeps no recurrent state") {
  const std::string path =
      test::make_model("kimi-linear-bad-kv",
                       "--arch kimi-linear --n-embd 64 --n-layer 2 --n-head 2 --n-ff 128 --n-expert 4 "
                       "--n-expert-used 2 --mla-every 1 --kl-n-ff-expert 64 --kl-kv-lora-rank 32 "
                       "--kl-qk-rope-dim 16 --kl-qk-nope-dim 32 --kl-v-head-dim 32 --type F32 --seed 1");
  auto m = Model::load(path, {.engine = {.context = 16}});
  CHECK(m->sequence_state().n_recurrent_layers() == 0);
  CHECK(m->sequence_state().recurrent_bytes() == 0);
}
