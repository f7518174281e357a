// qwen3next / qwen35moe specifics: the layer pattern (full attention every
// full_attention_interval layers), the sequence state's layout (attention rows
// for those layers only, a fixed Gated DeltaNet state for the others), its
// reset when a sequence starts over, and a chunked prompt equal to the whole
// one. Logits against the
// reference are in tests/conformance (generated-model goldens); batched =
// alone in engine_test.cpp, prefill = token by token in forward_test.cpp,
// streaming in weight_streaming_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <span>

#include "engine/model/model.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

TEST_CASE(
    "qwen3next/qwen35moe: attention rows for the full-attention layers only, a fixed delta-net state for the others") {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    CAPTURE(arch);
    auto m = Model::load(test::qwen_next_model(arch), {.engine = {.context = 32, .max_sequences = 3}});
    const SequenceState& st = m->sequence_state();
    CHECK(m->hparams().is_recurrent(0));  // G A G A
    CHECK_FALSE(m->hparams().is_recurrent(1));
    CHECK(st.n_attention_layers() == 2);
    CHECK(st.n_recurrent_layers() == 2);
    // 2 KV heads of 32, K and V, F16, per attention layer.
    CHECK(st.bytes_per_token() == 2u * (2u * 32u * 2u) * 2u);
    // Conv: 3 taps kept over q, k (2 heads of 16 each) and v (4 heads of 16); states: 4 value heads of 16 x 16; F32.
    CHECK(st.recurrent_bytes_per_sequence() == 2u * (3u * (2u * 32u + 64u) + 4u * 16u * 16u) * 4u);
    CHECK(st.bytes() == 3u * 32u * st.bytes_per_token() + 3u * st.recurrent_bytes_per_sequence());
  }
}

TEST_CASE("qwen3next/qwen35moe: a restarted sequence starts from zero state; a chunked prompt equals the whole") {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    CAPTURE(arch);
    auto m = Model::load(test::qwen_next_model(arch), {.engine = {.context = 32, .max_batch_tokens = 8}});
    const std::vector<int32_t> a = {5, 77, 123, 9, 300, 17, 64}, b = {41, 42, 43, 44, 45, 46};
    const std::vector<float> first = test::check_restart_is_fresh(*m, a, b);
    // The same prompt in chunks of 3, 1 and 3 tokens: the state carries over.
    std::vector<float> chunked, part;
    const std::span<const int32_t> all(a);
    for (auto [from, len] : {std::pair<size_t, size_t>{0, 3}, {3, 1}, {4, 3}}) {
      m->forward(all.subspan(from, len), static_cast<int64_t>(from), true, part);
      chunked.insert(chunked.end(), part.begin(), part.end());
    }
    CHECK(test::max_abs_diff(first, chunked) < 1e-3);
    for (float v : first) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("qwen3next/qwen35moe: NextN blocks are not layers, and are neither run, resident nor streamed") {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    CAPTURE(arch);
    const ModelOptions mo{.engine = {.context = 32, .memory_budget = 1ull << 30, .io_mode = "pread"}};
    auto plain = Model::load(test::qwen_next_model(arch), mo);
    auto mtp = Model::load(test::qwen_next_model(arch, "--qn-nextn-layers 1 --qn-layer-types true"), mo);
    CHECK(mtp->hparams().n_layer == 4);
    CHECK(mtp->hparams().n_layer_nextn == 1);
    CHECK(mtp->hparams().recurrent_layers == plain->hparams().recurrent_layers);
    const auto& a = plain->streaming().plan;
    const auto& b = mtp->streaming().plan;
    CHECK(b.streamed_experts == a.streamed_experts);
    CHECK(b.streamed_bytes == a.streamed_bytes);
    CHECK(b.resident_tensors == a.resident_tensors);
    // The trunk's tensors are the same (values keyed by name and seed): so are the logits.
    const std::vector<int32_t> toks = {5, 77, 123, 9, 300};
    std::vector<float> x, y;
    plain->forward(toks, 0, true, x);
    mtp->forward(toks, 0, true, y);
    CHECK(x == y);
  }
}
