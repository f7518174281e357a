// kimi-k3 specifics: the attention-residual mix and the situ activation
// against direct double-precision computations, the metadata the generator
// writes read back, routing observed on latent experts, and latent experts
// streamed through the expert cache (bit-identical to the mapping, and under
// a budget smaller than the file). Logits against the reference are in
// tests/conformance (generated-model goldens); batched = alone and resume in
// engine_test.cpp, prefill = token by token in forward_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "engine/layers/attn_residuals.h"
#include "engine/model/model.h"
#include "engine/spec/routing_spread.h"
#include "engine/state/ops.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// softmax over [score(ckpt_c)..., score(cur)] with score(v) = sum rms_norm(v) * w,
// then the weighted sum of the raw vectors, all in double.
std::vector<double> res_mix_double(const std::vector<float>& ckpt, int64_t n_ckpt, const std::vector<float>& cur,
                                   const std::vector<float>& w, float eps) {
  const int64_t d = static_cast<int64_t>(cur.size());
  auto score = [&](const float* v) {
    double sq = 0, dot = 0;
    for (int64_t i = 0; i < d; ++i) sq += double(v[i]) * v[i];
    const double scale = 1.0 / std::sqrt(sq / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) dot += double(v[i]) * scale * w[i];
    return dot;
  };
  std::vector<double> sc;
  for (int64_t c = 0; c < n_ckpt; ++c) sc.push_back(score(&ckpt[c * d]));
  sc.push_back(score(cur.data()));
  const double mx = *std::max_element(sc.begin(), sc.end());
  double sum = 0;
  for (double& v : sc) sum += (v = std::exp(v - mx));
  std::vector<double> out(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t c = 0; c < n_ckpt; ++c) out[i] += sc[c] / sum * ckpt[c * d + i];
    out[i] += sc[n_ckpt] / sum * cur[i];
  }
  return out;
}

}  // namespace

TEST_CASE("kimi-k3: the attention-residual mix matches a direct double-precision computation") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t d = 96;
  for (int64_t n_ckpt : {0, 1, 3, 7}) {
    std::vector<float> ckpt(static_cast<size_t>(n_ckpt * d)), cur(d), w(d), out(d), scores(n_ckpt + 1);
    for (size_t c = 0; c < ckpt.size(); ++c) ckpt[c] = nd(rng) * float(1 + c / d);  // checkpoints of different sizes
    for (auto& v : cur) v = 3.0f * nd(rng);
    for (auto& v : w) v = 0.3f * nd(rng);
    res_mix(ckpt.data(), n_ckpt, cur.data(), w.data(), d, 1e-6f, scores.data(), out.data());
    const std::vector<double> want = res_mix_double(ckpt, n_ckpt, cur, w, 1e-6f);
    double max_err = 0;
    for (int64_t i = 0; i < d; ++i)
      max_err = std::max(max_err, std::fabs(out[i] - want[i]) / (1.0 + std::fabs(want[i])));
    CAPTURE(n_ckpt);
    CHECK(max_err < 1e-5);
    if (n_ckpt == 0) CHECK(out == cur);  // nothing banked: the stream as it is
    // The scores are a distribution over the checkpoints and the stream.
    if (n_ckpt > 0) {
      double p = 0;
      for (float v : scores) p += v;
      CHECK(p == doctest::Approx(1.0).epsilon(1e-6));
    }
  }
  // In place (out == cur) gives the same values.
  std::vector<float> ckpt(2 * d), cur(d), w(d), out(d), scores(3);
  for (auto& v : ckpt) v = nd(rng);
  for (auto& v : cur) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  res_mix(ckpt.data(), 2, cur.data(), w.data(), d, 1e-6f, scores.data(), out.data());
  res_mix(ckpt.data(), 2, cur.data(), w.data(), d, 1e-6f, scores.data(), cur.data());
  CHECK(out == cur);
}

TEST_CASE("kimi-k3: situ matches its definition, with and without the up-branch beta") {
  const std::vector<float> g0 = {-30.0f, -4.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 7.0f, 40.0f};
  const std::vector<float> u0 = {3.0f, -2.0f, 0.5f, 10.0f, 1.0f, -20.0f, 0.75f, -1.0f, 2.0f};
  for (const auto& [beta, lbeta] : std::vector<std::pair<float, float>>{{4.0f, 8.0f}, {1.5f, 0.0f}, {2.0f, -1.0f}}) {
    std::vector<float> g = g0;
    ops::situ_mul(g.data(), u0.data(), static_cast<int64_t>(g.size()), beta, lbeta);
    for (size_t i = 0; i < g.size(); ++i) {
      const double x = g0[i], u = u0[i];
      const double a = beta * std::tanh(x / beta) / (1.0 + std::exp(-x));
      const double up = lbeta > 0 ? lbeta * std::tanh(u / lbeta) : u;
      CAPTURE(beta);
      CAPTURE(lbeta);
      CAPTURE(i);
      CHECK(g[i] == doctest::Approx(a * up).epsilon(1e-5));
    }
  }
  // Bounded by the betas: large gates saturate at beta, large ups at linear_beta.
  std::vector<float> g = {1000.0f};
  const float u[1] = {1000.0f};
  ops::situ_mul(g.data(), u, 1, 4.0f, 8.0f);
  CHECK(g[0] == doctest::Approx(32.0f));
}

TEST_CASE("kimi-k3: the generator's metadata reads back, and routing is observed on the latent experts") {
  const ModelOptions mo{.engine = {.context = 32, .max_batch_tokens = 8}};
  auto m = Model::load(test::kimi_k3_model(), mo);
  const Hparams& hp = m->hparams();
  CHECK(hp.attn_res_block_size == 2);
  CHECK(hp.n_expert_latent == 32);
  CHECK(hp.expert_width() == 32);
  CHECK(hp.situ_beta == 4.0f);
  CHECK(hp.situ_linear_beta == 8.0f);
  CHECK(hp.kda_gate_lower_bound == -5.0f);
  CHECK(hp.expert_weights_norm);
  CHECK(m->sequence_state().n_recurrent_layers() == 2);

  RoutingSpread spread;
  m->set_routing_observer([&](const RoutingEvent& e) { spread.observe(e); });
  std::vector<float> logits;
  const std::vector<int32_t> toks = {5, 77, 123, 9, 300, 41, 42};
  m->forward(toks, 0, true, logits);
  const auto layers = spread.layers();
  REQUIRE(layers.size() == 3);  // layer 0 is dense
  for (const auto& l : layers) {
    CHECK(l.tokens == 7);
    CHECK(l.n_expert == 8);
    CHECK(l.distinct >= 2);
  }
  for (float v : logits) REQUIRE(std::isfinite(v));

  const Hparams plain = Model::load(test::kimi_k3_plain_model(), mo)->hparams();
  CHECK(plain.attn_res_block_size == 0);
  CHECK(plain.n_expert_latent == 0);
  CHECK(plain.situ_linear_beta == 0.0f);
  CHECK(std::isinf(plain.kda_gate_lower_bound));
}

TEST_CASE("kimi-k3: latent experts streamed through a small cache give the mapping's logits bit for bit") {
  test::check_streamed_equals_mapped(test::kimi_k3_model(), 12);
}

TEST_CASE("kimi-k3: peak RSS stays within memory_budget for a latent-MoE model larger than it") {
  // ~240 MB: 8 layers (one dense) of 32 latent experts (1024 -> 512) in MXFP4, Q8_0 elsewhere.
  const std::string path =
      test::make_model("kimi-k3-stream",
                       "--arch kimi-k3 --n-embd 1024 --n-layer 8 --n-head 8 --n-ff 1024 --n-expert 32 "
                       "--n-expert-used 4 --mla-every 4 --kda-head-dim 64 --kl-n-ff-expert 1024 "
                       "--kl-kv-lora-rank 128 --kl-qk-rope-dim 32 --kl-qk-nope-dim 64 --kl-v-head-dim 64 "
                       "--kl-n-shared-expert 1 --attn-res-block 3 --expert-latent 512 --type Q8_0 "
                       "--tensor-type _exps=MXFP4 --seed 33");
  test::check_runs_under_budget("kimi-k3", path, 150, 1.5, "pread", 8);
}
