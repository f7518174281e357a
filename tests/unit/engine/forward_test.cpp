// The forward pass: a batch of tokens must give the same logits as feeding
// them one at a time (the KV cache and the batched kernels agree with the
// single-token path), for dense and MoE models.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/model/model.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

void check_batch_equals_sequential(const std::string& path) {
  const double max_diff = test::batched_vs_sequential(path);
  MESSAGE(path << ": max |batched - sequential| = " << max_diff);
  CHECK(max_diff < 1e-3);
}

}  // namespace

TEST_CASE("batched prefill equals token-by-token decoding: dense Q8_0") {
  check_batch_equals_sequential(test::dense_model());
}
TEST_CASE("batched prefill equals token-by-token decoding: MoE Q4_0") {
  check_batch_equals_sequential(test::moe_model());
}

TEST_CASE("batched prefill equals token-by-token decoding: mixed K-quants") {
  check_batch_equals_sequential(test::kquant_moe_model());
}

TEST_CASE("batched prefill equals token-by-token decoding: MoE with MXFP4 experts") {
  const std::string path = test::mxfp4_moe_model();
  check_batch_equals_sequential(path);
  // The experts' products are what differs from the other models: the logits
  // must be finite and depend on the token.
  auto m = Model::load(path, {.engine = {.context = 16, .max_batch_tokens = 4}});
  std::vector<float> a, b;
  const int32_t t1[1] = {5}, t2[1] = {6};
  m->forward(t1, 0, false, a);
  m->forward(t2, 0, false, b);
  for (const float v : a) REQUIRE(std::isfinite(v));
  CHECK(a != b);
}

TEST_CASE("forward rejects out-of-range tokens and positions") {
  auto m = Model::load(test::dense_model(), {.engine = {.context = 16, .max_batch_tokens = 4}});
  std::vector<float> logits;
  const int32_t bad[1] = {static_cast<int32_t>(m->n_vocab())};
  CHECK_THROWS_WITH(m->forward(bad, 0, false, logits), doctest::Contains("outside the vocabulary"));
  const int32_t ok[1] = {1};
  CHECK_THROWS(m->forward(ok, 16, false, logits));
}

TEST_CASE("batched prefill equals token-by-token decoding: kimi-linear (KDA + MLA, MXFP4 experts)") {
  check_batch_equals_sequential(test::kimi_linear_model());
}

TEST_CASE("batched prefill equals token-by-token decoding: kimi-k3 (attention residuals, latent MXFP4 experts)") {
  check_batch_equals_sequential(test::kimi_k3_model());
}

TEST_CASE("batched prefill equals token-by-token decoding: kimi-k3 with its optional parts off") {
  check_batch_equals_sequential(test::kimi_k3_plain_model());
}

TEST_CASE(
    "batched prefill equals token-by-token decoding: qwen3next and qwen35moe (Gated DeltaNet + gated attention)") {
  check_batch_equals_sequential(test::qwen_next_model("qwen3next"));
  check_batch_equals_sequential(test::qwen_next_model("qwen35moe"));
}
