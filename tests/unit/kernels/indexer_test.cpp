// The DSA indexer's scores (engine/kernels/indexer.h) on every ISA path this
// CPU runs: the scalar path equals the plain loop (q . k in order, then the
// ReLU-weighted sum over heads) bit for bit; each SIMD path equals the same
// sum with its dot products in ggml_vec_dot_f32's lane order
// (indexer_dot_lanes, portable std::fma) bit for bit, and the scalar path
// within an error bound: two summation orders of one dot product of n terms
// each lie within n * eps * sum |q_i k_i| of the exact value (Higham's
// gamma_n, n * eps < 0.01), the ReLU does not widen a difference and the head
// sum, the same order on both sides, adds at most (n_head + 1) eps relative
// to sum_h |w_h| sum_i |q_hi k_i|; the check allows 2 (head_dim + n_head + 2)
// eps times that sum.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "engine/kernels/indexer.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

struct Case {
  int64_t n_head, head_dim, stride, n_keys;
};

// head_dim 64 and 128 (the models'), 96 and 72 (values past the last 64- and 32-wide block).
constexpr Case kCases[] = {{8, 64, 72, 53}, {3, 128, 128, 40}, {1, 96, 100, 17}, {5, 72, 80, 9}, {64, 128, 130, 6}};

std::vector<uint16_t> f16_keys(const Case& c, uint32_t seed) {
  const auto f = random_normal(static_cast<size_t>(c.n_keys * c.stride), seed, 1.0f);
  std::vector<uint16_t> k(f.size());
  for (size_t i = 0; i < f.size(); ++i) k[i] = fp32_to_fp16(f[i]);
  return k;
}

}  // namespace

TEST_CASE(
    "indexer scores: scalar is the plain loop; each SIMD path is ggml's lane order exactly, the loop's within "
    "a bound") {
  for (const Case& c : kCases) {
    CAPTURE(c.n_head);
    CAPTURE(c.head_dim);
    const auto q = random_normal(static_cast<size_t>(c.n_head * c.head_dim), 11 + static_cast<uint32_t>(c.head_dim));
    auto w = random_normal(static_cast<size_t>(c.n_head), 5, 0.2f);
    w[0] = std::fabs(w[0]);
    const auto keys = f16_keys(c, 23 + static_cast<uint32_t>(c.n_head));
    std::vector<float> key(static_cast<size_t>(c.head_dim)), plain(static_cast<size_t>(c.n_keys)),
        bound(static_cast<size_t>(c.n_keys));
    for (int64_t j = 0; j < c.n_keys; ++j) {
      for (int64_t i = 0; i < c.head_dim; ++i) key[i] = fp16_to_fp32(keys[j * c.stride + i]);
      float score = 0;
      double mass = 0;
      for (int64_t h = 0; h < c.n_head; ++h) {
        float dot = 0;
        double abs_sum = 0;
        for (int64_t i = 0; i < c.head_dim; ++i) {
          dot += q[h * c.head_dim + i] * key[i];
          abs_sum += std::fabs(static_cast<double>(q[h * c.head_dim + i]) * key[i]);
        }
        score += std::max(dot, 0.0f) * w[h];
        mass += std::fabs(w[h]) * abs_sum;
      }
      plain[j] = score;
      bound[j] = static_cast<float>(2.0 * static_cast<double>(c.head_dim + c.n_head + 2) * FLT_EPSILON * mass);
    }
    std::vector<float> got(static_cast<size_t>(c.n_keys));
    indexer_scores(Isa::scalar, q.data(), w.data(), c.n_head, c.head_dim, keys.data(), c.stride, c.n_keys, got.data());
    for (int64_t j = 0; j < c.n_keys; ++j) CHECK(got[j] == plain[j]);

    for (const Isa isa : simd_isas_to_test("indexer score paths")) {
      const std::string path = isa_name(isa);
      CAPTURE(path);
      const int width = isa == Isa::avx512 ? 16 : 8;
      indexer_scores(isa, q.data(), w.data(), c.n_head, c.head_dim, keys.data(), c.stride, c.n_keys, got.data());
      int differ = 0;
      for (int64_t j = 0; j < c.n_keys; ++j) {
        for (int64_t i = 0; i < c.head_dim; ++i) key[i] = fp16_to_fp32(keys[j * c.stride + i]);
        float score = 0;
        for (int64_t h = 0; h < c.n_head; ++h) {
          const float dot = indexer_dot_lanes(&q[h * c.head_dim], key.data(), c.head_dim, width);
          score += std::max(dot, 0.0f) * w[h];
        }
        CHECK(got[j] == score);
        CHECK(std::fabs(got[j] - plain[j]) <= bound[j]);
        differ += got[j] != plain[j];
      }
      MESSAGE(path << " n_head " << c.n_head << " head_dim " << c.head_dim << ": " << differ << " of " << c.n_keys
                   << " scores differ from the plain loop's (within the bound)");
    }
  }
}

TEST_CASE("indexer scores: every head negative gives exactly 0 on every path; no keys writes nothing") {
  const Case c{4, 64, 64, 3};
  std::vector<float> q(static_cast<size_t>(c.n_head * c.head_dim), 0.5f), w(4, 0.25f);
  std::vector<uint16_t> keys(static_cast<size_t>(c.n_keys * c.stride), fp32_to_fp16(-1.0f));
  for (const Isa isa : isas_to_test()) {
    const std::string path = isa_name(isa);
    CAPTURE(path);
    std::vector<float> got(4, -7.0f);
    indexer_scores(isa, q.data(), w.data(), c.n_head, c.head_dim, keys.data(), c.stride, c.n_keys, got.data());
    CHECK(got[0] == 0.0f);
    CHECK(got[2] == 0.0f);
    CHECK(got[3] == -7.0f);
    indexer_scores(isa, q.data(), w.data(), c.n_head, c.head_dim, keys.data(), c.stride, 0, got.data() + 3);
    CHECK(got[3] == -7.0f);
  }
}
