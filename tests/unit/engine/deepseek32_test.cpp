// deepseek32 (DeepSeek V3.2) and glm-dsa (GLM-5.x) on generated models (the
// goldens in tests/conformance check the arithmetic against the reference):
// the indexer's keys as read and cached beside the latent; below top_k
// positions the model is its deepseek2 twin (same seed, same weights but the
// indexer's) to the bit, past it the indexer's choice changes the logits; a
// prompt in one pass equals it token by token and two sequences batched equal
// each alone; glm-dsa's per-layer indexer types; the Walsh-Hadamard rotation
// and the masked attention kernel against plain references on every ISA path.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/kernels/kernels.h"
#include "engine/layers/attention.h"
#include "engine/layers/dsa_indexer.h"
#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

const std::string kShape =
    " --n-embd 64 --n-layer 3 --n-head 4 --n-ff 96 --n-expert 8 --n-expert-used 2 --q-lora-rank 48 "
    "--kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 16 --v-head-dim 16 --n-ff-expert 32 --type F32 --seed 71";
const std::string kDsa = " --dsa-heads 4 --dsa-head-dim 64";

std::string dsa_model(const std::string& arch, int top_k, const std::string& extra = "") {
  return test::make_model(arch + "-k" + std::to_string(top_k),
                          "--arch " + arch + kShape + kDsa + " --dsa-top-k " + std::to_string(top_k) + extra);
}
std::string ds2_twin() { return test::make_model("dsa-ds2-twin", "--arch deepseek2" + kShape); }

}  // namespace

TEST_CASE("deepseek32: the indexer's shape as read, its keys cached beside the latent") {
  auto m = Model::load(dsa_model("deepseek32", 8), {.engine = {.context = 32, .max_batch_tokens = 16}});
  const Hparams& hp = m->hparams();
  CHECK(hp.indexer_n_head == 4);
  CHECK(hp.indexer_head_dim == 64);
  CHECK(hp.indexer_top_k == 8);
  CHECK(hp.indexer_rope_type == RopeType::neox);
  CHECK(hp.indexer_norm_eps == 1e-6f);
  CHECK(hp.indexer_full_layers.empty());  // every layer full
  // Per layer and token, F16: the latent (32), its rotated key part (16), the indexer's key (64).
  CHECK(m->sequence_state().bytes_per_token() == 3u * (32u + 16u + 64u) * 2u);
}

TEST_CASE("glm-dsa: per-layer indexer types, the GLM-5 default, the indexer's rope and epsilon") {
  auto typed =
      Model::load(dsa_model("glm-dsa", 8, " --dsa-types 1,0,1"), {.engine = {.context = 32, .max_batch_tokens = 16}});
  CHECK(typed->hparams().indexer_full_layers == std::vector<uint8_t>{1, 0, 1});
  CHECK(typed->hparams().indexer_rope_type == RopeType::norm);
  CHECK(typed->hparams().indexer_norm_eps == 0.0f);
  CHECK(typed->hparams().expert_gating == ExpertGating::sigmoid);
  // The shared layer's indexer tensors are neither written nor needed.
  CHECK(typed->files().find_tensor("blk.1.indexer.proj.weight") == nullptr);
  CHECK(typed->files().find_tensor("blk.2.indexer.proj.weight") != nullptr);
  // Without the key, a GLM-5 (context below 1M) has every layer full.
  auto plain = Model::load(dsa_model("glm-dsa", 8), {.engine = {.context = 32, .max_batch_tokens = 16}});
  CHECK(plain->hparams().indexer_full_layers == std::vector<uint8_t>{1, 1, 1});
}

TEST_CASE("deepseek32, glm-dsa: below top_k the deepseek2 twin to the bit; past it the indexer's choice counts") {
  const std::string twin = ds2_twin();
  for (const char* arch : {"deepseek32", "glm-dsa"}) {
    CAPTURE(arch);
    auto probe = Model::load(twin, {.engine = {.context = 32, .max_batch_tokens = 16}});
    const int64_t V = probe->n_vocab();
    const std::vector<int32_t> toks = test::some_tokens(V, 20, 5);
    const std::vector<float> dense = test::prompt_logits(twin, toks);
    // top_k 32 covers the prompt: dense MLA everywhere.
    CHECK(test::max_diff_rows(test::prompt_logits(dsa_model(arch, 32), toks), dense, V, 0, 20) == 0.0);
    // top_k 6: positions 0..5 see every key, later ones 6 of them.
    const std::vector<float> sparse = test::prompt_logits(dsa_model(arch, 6), toks);
    CHECK(test::max_diff_rows(sparse, dense, V, 0, 6) == 0.0);
    const double later = test::max_diff_rows(sparse, dense, V, 6, 20);
    MESSAGE(std::string(arch) << ": max |sparse - dense| past top_k = " << later);
    CHECK(later > 1e-3);
  }
}

TEST_CASE("deepseek32, glm-dsa: one pass equals token by token; two sequences batched equal each alone") {
  const std::pair<const char*, std::string> models[] = {{"deepseek32", dsa_model("deepseek32", 5)},
                                                        {"glm-dsa", dsa_model("glm-dsa", 5, " --dsa-types 1,0,1")}};
  for (const auto& [family, path] : models)
    test::check_one_pass_and_batched(family, path,
                                     {.alone = ModelOptions{.engine = {.context = 64, .max_batch_tokens = 32}},
                                      .a_tokens = 14,
                                      .b_tokens = 11,
                                      .a_offset = 1,
                                      .b_offset = 2});
}

TEST_CASE("deepseek32: indexer keys absent or unusable are refused naming the key") {
  Hparams hp;
  hp.arch = "deepseek32";
  hp.indexer_n_head = 0;
  CHECK_THROWS_WITH_AS(dsa_shape(hp, 48), doctest::Contains("attention.indexer.head_count' is missing"), Error);
  hp.indexer_n_head = 4;
  hp.indexer_top_k = 8;
  hp.indexer_head_dim = 48;
  CHECK_THROWS_WITH_AS(dsa_shape(hp, 48), doctest::Contains("multiple of 64"), Error);
}

TEST_CASE("hadamard_rotate: the orthonormal Sylvester matrix, as the reference builds it") {
  for (const int64_t n : {64, 128, 256}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(n)), y;
    for (float& v : x) v = dist(rng);
    y = x;
    hadamard_rotate(y.data(), n);
    // H[i][j] = (-1)^popcount(i & j) / sqrt(n).
    double worst = 0, norm_x = 0, norm_y = 0;
    for (int64_t i = 0; i < n; ++i) {
      double r = 0;
      for (int64_t j = 0; j < n; ++j) r += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x[static_cast<size_t>(j)];
      r /= std::sqrt(double(n));
      worst = std::max(worst, std::fabs(r - y[static_cast<size_t>(i)]));
      norm_x += double(x[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      norm_y += double(y[static_cast<size_t>(i)]) * y[static_cast<size_t>(i)];
    }
    CHECK(worst < 1e-5);
    CHECK(std::fabs(norm_x - norm_y) < 1e-3 * norm_x);
  }
}

TEST_CASE("attend_one_head with a selection: the masked positions weigh 0, on every ISA path") {
  const int64_t dim = 48, vdim = 32, n = 37;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<uint16_t> k(static_cast<size_t>(n * dim)), v(static_cast<size_t>(n * vdim)), q(static_cast<size_t>(dim));
  for (auto& x : k) x = kernels::fp32_to_fp16(dist(rng));
  for (auto& x : v) x = kernels::fp32_to_fp16(dist(rng));
  for (auto& x : q) x = kernels::fp32_to_fp16(dist(rng));
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  for (int64_t j : {0, 3, 8, 9, 15, 16, 23, 30, 36}) keep[static_cast<size_t>(j)] = 1;
  const float scale = 0.2f;
  // Plain reference in double: softmax over the kept positions.
  std::vector<double> ref(static_cast<size_t>(vdim), 0.0);
  {
    std::vector<double> s(static_cast<size_t>(n), -INFINITY);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (!keep[static_cast<size_t>(j)]) continue;
      double d = 0;
      for (int64_t i = 0; i < dim; ++i)
        d += double(kernels::fp16_to_fp32(q[static_cast<size_t>(i)])) *
             kernels::fp16_to_fp32(k[static_cast<size_t>(j * dim + i)]);
      s[static_cast<size_t>(j)] = d * scale;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    for (int64_t j = 0; j < n; ++j)
      if (keep[static_cast<size_t>(j)]) sum += std::exp(s[static_cast<size_t>(j)] - mx);
    for (int64_t j = 0; j < n; ++j) {
      if (!keep[static_cast<size_t>(j)]) continue;
      const double p = std::exp(s[static_cast<size_t>(j)] - mx) / sum;
      for (int64_t d = 0; d < vdim; ++d)
        ref[static_cast<size_t>(d)] += p * kernels::fp16_to_fp32(v[static_cast<size_t>(j * vdim + d)]);
    }
  }
  const kernels::Isa saved = kernels::active_isa();
  std::vector<std::vector<float>> outs;
  for (const kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2}) {
    kernels::set_isa(isa);
    std::vector<float> out(static_cast<size_t>(vdim));
    AttendSpan span;
    span.keep = keep.data();
    attend_one_head(q.data(), k.data(), dim, v.data(), vdim, dim, vdim, n - 1, scale, out.data(), span);
    double worst = 0;
    for (int64_t d = 0; d < vdim; ++d)
      worst = std::max(worst, std::fabs(out[static_cast<size_t>(d)] - ref[static_cast<size_t>(d)]));
    MESSAGE(std::string(kernels::isa_name(kernels::active_isa())) << ": max |out - ref| = " << worst);
    CHECK(worst < 2e-3);  // probabilities rounded to F16, as the reference's
    outs.push_back(out);
  }
  kernels::set_isa(saved);
  // The two paths agree (the AVX2 one only where the CPU has it; else both ran scalar).
  CHECK(test::max_abs_diff(outs[0], outs[1]) < 1e-5);
}

TEST_CASE("deepseek32, glm-dsa: a NextN block is described but never read; the file without it is the same model") {
  for (const char* arch : {"deepseek32", "glm-dsa"}) {
    CAPTURE(std::string(arch));
    const std::string with = dsa_model(arch, 6, " --dsa-nextn-layers 1"), without = dsa_model(arch, 6);
    auto mw = Model::load(with, {.engine = {.context = 32, .max_batch_tokens = 16}});
    auto mn = Model::load(without, {.engine = {.context = 32, .max_batch_tokens = 16}});
    CHECK(mw->hparams().n_layer == 3);
    CHECK(mw->hparams().n_layer_nextn == 1);
    CHECK(mw->files().find_tensor("blk.3.nextn.eh_proj.weight") != nullptr);
    CHECK(mw->files().find_tensor("blk.3.indexer.proj.weight") != nullptr);
    CHECK(mw->tensors().size() == mn->tensors().size());
    const std::vector<int32_t> toks = test::some_tokens(mw->n_vocab(), 12, 3);
    CHECK(test::prompt_logits(with, toks) == test::prompt_logits(without, toks));
  }
}
