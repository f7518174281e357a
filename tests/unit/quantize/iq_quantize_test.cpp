// The importance-weighted i-quant quantizers (iq_quantize.h): the grid search
// structure against facts of ggml's tables, round trips within a bound per
// type, importance steering the error, and the errors of
// quantize_row_weighted. Byte identity with llama-quantize is checked on
// whole models by tests/conformance/reference/reference_quantize.sh (its
// goldens then regenerate those bytes in tests/conformance/logits_test.cpp).
#include <cmath>
#include <random>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "common/error.h"
#include "engine/kernels/kernels.h"
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/quantize_weighted.h"

using namespace ns::kernels;
using ns::gguf::GgmlType;

namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  return x;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x, const float* importance) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(ns::gguf::row_bytes(ns::gguf::traits(t), static_cast<uint64_t>(n)));
  quantize_row_weighted(t, x.data(), q.data(), n, importance);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// sqrt(sum w (x - y)^2 / sum w x^2) over the elements where mask holds.
double relative_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<bool>& mask) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (mask[i]) {
      num += (x[i] - y[i]) * (x[i] - y[i]);
      den += x[i] * x[i];
    }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("the i-quant grid searches hold ggml's grid keys and nearest neighbours") {
  // ggml's kgrid_2bit_256, kgrid_2bit_512 and kgrid_1bit_2048 start 0, 2, 5,
  // 8, 10 (levels 2 bits each, element 0 lowest): the grids' first entries.
  for (auto g : {iq::SearchGrid::iq2xxs, iq::SearchGrid::iq2xs, iq::SearchGrid::iq1s}) {
    const iq::GridSearch& s = iq::grid_search(g);
    const uint16_t keys[5] = {0, 2, 5, 8, 10};
    for (int e = 0; e < 5; ++e) {
      int8_t L[8];
      for (int j = 0; j < 8; ++j) L[j] = static_cast<int8_t>(iq::grid_level(s, e, j));
      CHECK(iq::grid_key(L) == keys[e]);
      CHECK(s.on_grid(keys[e]) == e);
    }
    CHECK(s.level.size() == (g == iq::SearchGrid::iq2xxs ? 256u : g == iq::SearchGrid::iq2xs ? 512u : 2048u));
    // Every key of levels 0..2 is on the grid or has a list, nearest first,
    // holding every entry at the smallest distance.
    int off_grid = 0;
    for (int u = 0; u < 6561; ++u) {
      uint16_t key = 0;
      for (int j = 0, v = u; j < 8; ++j, v /= 3) key = static_cast<uint16_t>(key | ((v % 3) << (2 * j)));
      if (s.on_grid(key) >= 0) continue;
      ++off_grid;
      const uint16_t* nb = s.neighbours(key);
      REQUIRE(nb[0] > 0);
      const auto dist = [&](int e) {
        int d = 0;
        for (int j = 0; j < 8; ++j) {
          const int diff = iq::grid_level(s, e, j) - ((key >> (2 * j)) & 3);
          d += diff * diff;
        }
        return d;
      };
      int nearest = 1 << 30, at_nearest = 0;
      for (size_t e = 0; e < s.level.size(); ++e) nearest = std::min(nearest, dist(static_cast<int>(e)));
      for (size_t e = 0; e < s.level.size(); ++e) at_nearest += dist(static_cast<int>(e)) == nearest;
      CHECK(dist(nb[1]) == nearest);
      int listed_at_nearest = 0;
      for (int k = 1; k <= nb[0]; ++k) {
        listed_at_nearest += dist(nb[k]) == nearest;
        if (k > 1) CHECK(dist(nb[k - 1]) <= dist(nb[k]));
      }
      CHECK(listed_at_nearest == at_nearest);
    }
    CHECK(off_grid == 6561 - static_cast<int>(s.level.size()));
  }
}

TEST_CASE("the IQ3_XXS grid search holds ggml's grid keys and lists every off-grid key") {
  // ggml's iq3 kgrid_256 starts 0, 2, 4, 9, 11 (levels 3 bits each, element 0 lowest).
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq3xxs);
  CHECK(s.group == 4);
  const uint16_t keys[5] = {0, 2, 4, 9, 11};
  for (int e = 0; e < 5; ++e) {
    int8_t L[4];
    for (int j = 0; j < 4; ++j) L[j] = static_cast<int8_t>(iq::grid_level(s, e, j));
    CHECK(iq::grid_key(s, L) == keys[e]);
    CHECK(s.on_grid(keys[e]) == e);
  }
  int off_grid = 0;
  for (int u = 0; u < 4096; ++u)
    if (s.on_grid(static_cast<uint16_t>(u)) < 0) {
      ++off_grid;
      CHECK(s.neighbours(static_cast<uint16_t>(u))[0] > 0);
    }
  CHECK(off_grid == 4096 - 256);
}

TEST_CASE("i-quant round trips stay within each type's bound, and importance steers the error") {
  constexpr int64_t n = 1024;
  const std::vector<float> x = gaussian(n, 11);
  // Relative RMS error bounds with uniform importance (measured on Gaussian
  // rows: IQ2_XXS 0.34, IQ2_XS 0.30, IQ1_S 0.49, IQ1_M 0.45, IQ3_XXS 0.18, IQ4_XS 0.074).
  const struct {
    GgmlType t;
    double bound;
    double focus;  // the error where importance is 100x must drop below this share
  } cases[] = {{GgmlType::IQ2_XXS, 0.38, 0.9}, {GgmlType::IQ2_XS, 0.34, 0.9},  {GgmlType::IQ1_S, 0.55, 0.9},
               {GgmlType::IQ1_M, 0.52, 0.9},   {GgmlType::IQ3_XXS, 0.21, 0.9}, {GgmlType::IQ4_XS, 0.12, 0.95}};
  std::vector<float> uniform(n, 1.0f), focused(n, 1.0f);
  std::vector<bool> all(n, true), important(n, false);
  for (int64_t i = 0; i < n; i += 4) {
    focused[static_cast<size_t>(i)] = 100.0f;
    important[static_cast<size_t>(i)] = true;
  }
  for (const auto& c : cases) {
    CAPTURE(ns::gguf::type_name(c.t));
    const std::vector<float> y = round_trip(c.t, x, uniform.data());
    const double err = relative_error(x, y, all);
    MESSAGE(ns::gguf::type_name(c.t) << " relative RMS error " << err);
    CHECK(err < c.bound);
    // Weighting every fourth column 100x trades error elsewhere for less there
    // (measured: IQ1_S 0.86x, IQ4_XS 0.90x: its levels are the nearest ones, only the scales follow the weights).
    const std::vector<float> yf = round_trip(c.t, x, focused.data());
    CHECK(relative_error(x, yf, important) < c.focus * relative_error(x, y, important));
  }
  // IQ1_M and IQ4_XS without importance weigh by x^2, as ggml does (measured ~0.57 and ~0.09).
  CHECK(relative_error(x, round_trip(GgmlType::IQ1_M, x, nullptr), all) < 0.62);
  CHECK(relative_error(x, round_trip(GgmlType::IQ4_XS, x, nullptr), all) < 0.12);
  CHECK(relative_error(x, round_trip(GgmlType::IQ3_XXS, x, nullptr), all) < 0.25);
}

TEST_CASE("i-quant quantizers: zero rows, missing importance and unsupported types") {
  constexpr int64_t n = 256;
  const std::vector<float> zeros(n, 0.0f), ones(n, 1.0f);
  for (GgmlType t :
       {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ3_XXS, GgmlType::IQ4_XS}) {
    CAPTURE(ns::gguf::type_name(t));
    for (float v : round_trip(t, zeros, ones.data())) CHECK(v == 0.0f);
    CHECK(importance_use(t) == Importance::used);
  }
  const std::vector<float> x = gaussian(n, 3);
  std::vector<uint8_t> q(1024);
  CHECK(needs_importance(GgmlType::IQ2_XXS));
  CHECK(needs_importance(GgmlType::IQ1_S));
  CHECK_FALSE(needs_importance(GgmlType::IQ1_M));
  CHECK_FALSE(needs_importance(GgmlType::IQ4_XS));
  CHECK_FALSE(needs_importance(GgmlType::IQ3_XXS));
  CHECK_THROWS_AS(quantize_row_weighted(GgmlType::IQ2_XXS, x.data(), q.data(), n, nullptr), ns::Error);
  CHECK_THROWS_AS(quantize_row_weighted(GgmlType::IQ1_S, x.data(), q.data(), n, nullptr), ns::Error);
  CHECK_THROWS_AS(quantize_row_weighted(GgmlType::IQ2_XS, x.data(), q.data(), n, nullptr), ns::Error);
  // ggml's Q4_K quantizer would use the weights, ours would not: refused.
  CHECK(importance_use(GgmlType::Q4_K) == Importance::unsupported);
  CHECK_THROWS_AS(quantize_row_weighted(GgmlType::Q4_K, x.data(), q.data(), n, ones.data()), ns::Error);
  // Q8_0 ignores them in ggml too: the unweighted bytes.
  CHECK(importance_use(GgmlType::Q8_0) == Importance::ignored);
  std::vector<uint8_t> a(q.size()), b(q.size());
  quantize_row_weighted(GgmlType::Q8_0, x.data(), a.data(), n, ones.data());
  quantize_row(GgmlType::Q8_0, x.data(), b.data(), n);
  CHECK(a == b);
}
