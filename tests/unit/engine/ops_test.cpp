#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/state/ops.h"

using namespace ns;

TEST_CASE("rms_norm scales to unit RMS times the weights") {
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 1, 2, 0.5f}, out(4);
  ops::rms_norm(x.data(), w.data(), 4, 0.0f, out.data());
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == doctest::Approx(x[i] / rms * w[i]).epsilon(1e-6));
}

TEST_CASE("softmax sums to one and survives large logits") {
  std::vector<float> x = {1000, 999, 998, -1e30f};
  ops::softmax(x.data(), 4);
  CHECK(x[0] + x[1] + x[2] + x[3] == doctest::Approx(1.0));
  CHECK(x[0] > x[1]);
  CHECK(x[3] == 0.0f);
}

TEST_CASE("rope: identity at position 0, norm-preserving, pairs by type") {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  auto a = v;
  ops::rope(a.data(), 2, 8, 8, 0, 10000.0f, 1.0f, RopeType::norm);
  for (int i = 0; i < 16; ++i) CHECK(a[i] == doctest::Approx(v[i]));

  for (RopeType type : {RopeType::norm, RopeType::neox}) {
    auto b = v;
    ops::rope(b.data(), 2, 8, 8, 5, 10000.0f, 1.0f, type);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 16; ++i) n0 += v[i] * v[i], n1 += b[i] * b[i];
    CHECK(n1 == doctest::Approx(n0).epsilon(1e-5));
  }
  // Dimension 0 pairs with 1 (norm) or with rope_dim/2 (neox): rotate a unit vector at dim 0 by pos 1.
  std::vector<float> e(8, 0.0f);
  e[0] = 1;
  auto n = e, x = e;
  ops::rope(n.data(), 1, 8, 8, 1, 10000.0f, 1.0f, RopeType::norm);
  ops::rope(x.data(), 1, 8, 8, 1, 10000.0f, 1.0f, RopeType::neox);
  CHECK(n[0] == doctest::Approx(std::cos(1.0)));
  CHECK(n[1] == doctest::Approx(std::sin(1.0)));
  CHECK(x[4] == doctest::Approx(std::sin(1.0)));
  CHECK(x[1] == 0.0f);
  // Only the first rope_dim dims rotate.
  auto p = v;
  ops::rope(p.data(), 1, 8, 4, 3, 10000.0f, 1.0f, RopeType::norm);
  for (int i = 4; i < 8; ++i) CHECK(p[i] == v[i]);
}

TEST_CASE("rope angles follow the float recurrence pos * base^(-2i/d) closely") {
  // Pair i of a unit vector at dims (2i, 2i+1) rotates by pos * base^(-2i/d).
  for (int64_t pos : {1, 17, 1000}) {
    std::vector<float> v(16, 0.0f);
    for (int i = 0; i < 8; ++i) v[2 * i] = 1.0f;
    ops::rope(v.data(), 1, 16, 16, pos, 10000.0f, 1.0f, RopeType::norm);
    for (int i = 0; i < 8; ++i) {
      const double theta = pos * std::pow(10000.0, -2.0 * i / 16);
      CAPTURE(pos);
      CAPTURE(i);
      CHECK(v[2 * i] == doctest::Approx(std::cos(theta)).epsilon(1e-4 * pos));
      CHECK(v[2 * i + 1] == doctest::Approx(std::sin(theta)).epsilon(1e-4 * pos));
    }
  }
}

TEST_CASE("expf_ggml is within 2 ulp of exp and saturates like the reference") {
  for (float x = -87.0f; x < 88.0f; x += 0.01171875f) {
    const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
    const float ulp = std::nextafter(ref, INFINITY) - ref;
    CAPTURE(x);
    CHECK(std::fabs(ops::expf_ggml(x) - ref) <= 2 * ulp);
  }
  CHECK(ops::expf_ggml(0.0f) == 1.0f);
  CHECK(ops::expf_ggml(-INFINITY) == 0.0f);
  CHECK(ops::expf_ggml(-200.0f) == 0.0f);
  CHECK(std::isinf(ops::expf_ggml(200.0f)));
}

TEST_CASE("expf_ggml_8 gives expf_ggml's bits on the scalar and the AVX2 path") {
  std::vector<float> x;
  for (float v = -200.0f; v < 100.0f; v += 0.0390625f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -INFINITY, INFINITY, NAN, -87.5f, -88.7f, 88.7f, 1e-30f, -126.0f, 126.0f})
    x.push_back(v);
  while (x.size() % 8) x.push_back(0.5f);
  std::vector<bool> paths{false};
  if (kernels::detected_isa() >= kernels::Isa::avx2) paths.push_back(true);
  for (const bool avx2 : paths) {
    CAPTURE(avx2);
    for (size_t i = 0; i < x.size(); i += 8) {
      float y[8], in_place[8];
      ops::expf_ggml_8(&x[i], y, avx2);
      std::copy(&x[i], &x[i] + 8, in_place);
      ops::expf_ggml_8(in_place, in_place, avx2);  // as attention calls it: the lanes past |n| > 126 too
      for (size_t l = 0; l < 8; ++l) {
        const float want = ops::expf_ggml(x[i + l]);
        CAPTURE(x[i + l]);
        for (const float got : {y[l], in_place[l]}) {
          uint32_t a, b;
          std::memcpy(&a, &got, 4);
          std::memcpy(&b, &want, 4);
          CHECK((a == b || (std::isnan(got) && std::isnan(want))));
        }
      }
    }
  }
}

TEST_CASE("expf_ggml_16 gives expf_ggml_512's bits on the scalar and the AVX-512 path") {
  std::vector<float> x;
  for (float v = -200.0f; v < 100.0f; v += 0.0390625f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -INFINITY, INFINITY, NAN, -87.5f, -88.7f, 88.7f, 1e-30f, -126.0f, 126.0f, -103.9f})
    x.push_back(v);
  while (x.size() % 16) x.push_back(0.5f);
  std::vector<bool> paths{false};
  if (kernels::detected_isa() >= kernels::Isa::avx512) paths.push_back(true);
  for (const bool avx512 : paths) {
    CAPTURE(avx512);
    for (size_t i = 0; i < x.size(); i += 16) {
      float y[16], in_place[16];
      ops::expf_ggml_16(&x[i], y, avx512);
      std::copy(&x[i], &x[i] + 16, in_place);
      ops::expf_ggml_16(in_place, in_place, avx512);
      for (size_t l = 0; l < 16; ++l) {
        const float want = ops::expf_ggml_512(x[i + l]);
        CAPTURE(x[i + l]);
        for (const float got : {y[l], in_place[l]}) {
          uint32_t a, b;
          std::memcpy(&a, &got, 4);
          std::memcpy(&b, &want, 4);
          CHECK((a == b || (std::isnan(got) && std::isnan(want))));
        }
      }
    }
  }
}

TEST_CASE("silu_mul") {
  std::vector<float> g = {0, 1, -1}, u = {2, 2, 2};
  ops::silu_mul(g.data(), u.data(), 3);
  CHECK(g[0] == 0.0f);
  CHECK(g[1] == doctest::Approx(2.0 / (1.0 + std::exp(-1.0))));
  CHECK(g[2] == doctest::Approx(-2.0 / (1.0 + std::exp(1.0))));
}

TEST_CASE("expf_ggml_512 is within 2 ulp of exp, keeps denormals and saturates past |n| = 192") {
  for (float x = -87.0f; x < 88.0f; x += 0.01171875f) {
    const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
    const float ulp = std::nextafter(ref, INFINITY) - ref;
    CAPTURE(x);
    CHECK(std::fabs(ops::expf_ggml_512(x) - ref) <= 2 * ulp);
  }
  CHECK(ops::expf_ggml_512(0.0f) == 1.0f);
  const float tiny = ops::expf_ggml_512(-100.0f);  // 2^-144: a denormal, scaled exactly
  CHECK(tiny > 0.0f);
  CHECK(tiny == doctest::Approx(std::exp(-100.0)).epsilon(1e-2));
  CHECK(ops::expf_ggml_512(-140.0f) == 0.0f);  // below the smallest denormal: scaled to 0
  CHECK(ops::expf_ggml_512(-200.0f) == 0.0f);
  CHECK(std::isinf(ops::expf_ggml_512(100.0f)));
  CHECK(std::isinf(ops::expf_ggml_512(200.0f)));
}

// Each vector path against its one-lane emulation, bit for bit, at lengths
// that leave every possible tail, over inputs from the saturated ends through
// zero; and the emulations agree with plain silu to float accuracy.
TEST_CASE("silu_mul's AVX-512, AVX2 and scalar paths give their scalar emulations' bits") {
  std::vector<float> x;
  for (float v = -200.0f; v < 200.0f; v += 0.0390625f) x.push_back(v);
  for (float v = -3.0f; v < 3.0f; v += 0.001953125f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -INFINITY, INFINITY, -87.5f, -88.7f, 88.7f, 1e-30f, -1e-30f, 103.9f, -103.9f, 126.0f,
                  -126.0f, 150.0f, -150.0f, 192.5f, -192.5f})
    x.push_back(v);
  std::vector<float> u(x.size());
  for (size_t i = 0; i < u.size(); ++i) u[i] = 0.25f + static_cast<float>(i % 13) * 0.375f * (i % 2 ? -1.0f : 1.0f);
  std::vector<kernels::Isa> paths{kernels::Isa::scalar};
  if (kernels::detected_isa() >= kernels::Isa::avx2) paths.push_back(kernels::Isa::avx2);
  if (kernels::detected_isa() >= kernels::Isa::avx512) paths.push_back(kernels::Isa::avx512);
  for (const kernels::Isa isa : paths) {
    for (const size_t len : {size_t{1}, size_t{7}, size_t{15}, size_t{17}, size_t{33}, x.size()}) {
      CAPTURE(kernels::isa_name(isa));
      CAPTURE(len);
      std::vector<float> got(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(len)), want = got;
      ops::silu_mul(got.data(), u.data(), static_cast<int64_t>(len), isa);
      ops::silu_mul_emulated(want.data(), u.data(), static_cast<int64_t>(len), isa);
      size_t differ = 0;
      for (size_t i = 0; i < len; ++i) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        if (a != b && !(std::isnan(got[i]) && std::isnan(want[i]))) ++differ;
        const double s = static_cast<double>(x[i]) / (1.0 + std::exp(-static_cast<double>(x[i]))) * u[i];
        if (std::isfinite(s) && std::isfinite(got[i])) CHECK(got[i] == doctest::Approx(s).epsilon(1e-5).scale(1e-30));
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("swiglu_oai_mul: gpt-oss's clamped SwiGLU, x = min(g, limit), y = clamp(u, +-limit)") {
  const std::vector<float> g0 = {-20.0f, -1.0f, 0.0f, 0.5f, 3.0f, 7.0f, 9.0f, 100.0f};
  const std::vector<float> u0 = {1.0f, -8.0f, 2.0f, 0.25f, 12.0f, -3.0f, -0.5f, 7.5f};
  std::vector<float> g = g0;
  ops::swiglu_oai_mul(g.data(), u0.data(), static_cast<int64_t>(g.size()), 1.702f, 7.0f);
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min(double(g0[i]), 7.0), y = std::clamp(double(u0[i]), -7.0, 7.0);
    CAPTURE(i);
    CHECK(g[i] == doctest::Approx(x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0)).epsilon(1e-6));
  }
  // Gates above the limit saturate: 9 and 100 give what 7 gives.
  CHECK(g[6] == doctest::Approx(7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 0.5).epsilon(1e-6));
}
