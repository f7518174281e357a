// quantize -> dequantize round trips: per-element error bounds that follow
// from each format's definition, exact round trips of values on the grid, and
// hand-derived bytes of one block of each quantized format.
#include <algorithm>

#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

// Rows whose blocks span very different magnitudes, with a zero block too.
std::vector<float> varied_row(int64_t n, uint32_t seed) {
  auto x = random_normal(static_cast<size_t>(n), seed);
  const float scales[] = {1.0f, 1e-3f, 300.0f, 0.0f, 5e-5f, 1e4f};
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] *= scales[(i / 32) % 6];
  return x;
}

// Largest error of rounding a scale d to fp16: relative in the normal range,
// absolute (half of 2^-24) where d is an fp16 subnormal.
double half_rounding(double d) { return std::max(std::fabs(d) * 0x1p-11, 0x1p-25); }

}  // namespace

TEST_CASE("round trip error stays within each format's bound") {
  const int64_t n = 32 * 60;
  const auto x = varied_row(n, 1);
  for (const GgmlType t : kTypes) {
    CAPTURE(name(t));
    const auto q = quantized(t, x.data(), n);
    const auto y = dequantized(t, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float* xb = x.data() + b * 32;
      const float* yb = y.data() + b * 32;
      float amax = 0, max = 0;
      for (int j = 0; j < 32; ++j) {
        if (std::fabs(xb[j]) > amax) {
          amax = std::fabs(xb[j]);
          max = xb[j];
        }
      }
      for (int j = 0; j < 32; ++j) {
        const double err = std::fabs(static_cast<double>(xb[j]) - yb[j]);
        double bound = 0;
        switch (t) {
          case GgmlType::F32:
            bound = 0;
            break;
          case GgmlType::F16:
            bound = std::max(std::fabs(xb[j]) * 0x1p-11, 0x1p-25);
            break;  // subnormal halves: 2^-25
          case GgmlType::BF16:
            bound = std::fabs(xb[j]) * 0x1p-8;
            break;
          case GgmlType::Q8_0: {
            // |x - q d| <= d / 2, plus |q| <= 127 times the fp16 rounding of d.
            const double d = amax / 127.0;
            bound = (d * 0.5 + 127 * half_rounding(d)) * (1 + 1e-6);
            break;
          }
          case GgmlType::Q4_0: {
            // Positions x / d fall in [-8, 8]; 8 is clamped to 7, so elements
            // near -max may be off by a full step, the rest by half a step.
            const double d = std::fabs(max) / 8.0;
            const double pos = max != 0 ? -8.0 * xb[j] / max : 0.0;
            bound = (d * (pos > 7.5 ? 1.0 : 0.5) + 8 * half_rounding(d)) * (1 + 1e-6);
            break;
          }
          default:
            FAIL("untested type");
        }
        if (err > bound) FAIL_CHECK("block " << b << " element " << j << ": " << xb[j] << " -> " << yb[j]);
      }
    }
  }
}

TEST_CASE("values on a format's grid round-trip exactly") {
  // Q8_0: d = 2^-3 exactly when the largest magnitude is 127 * 2^-3.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 37) % 255 - 127) * 0.125f;
  x[5] = 127 * 0.125f;
  x[40] = -127 * 0.125f;
  CHECK(dequantized(GgmlType::Q8_0, quantized(GgmlType::Q8_0, x.data(), 64).data(), 64) == x);

  // Q4_0: d = -max / 8 is a power of two; the extreme value maps to nibble 0.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 5) % 15 - 7) * 0.25f;  // -7..7 steps
  x[3] = -8 * 0.25f;                                                                 // block 0: max = -2, d = 0.25
  x[33] = 8 * 0.25f;  // block 1: max = +2, d = -0.25, so +2 is nibble 0 and -1.75 is nibble 15
  CHECK(dequantized(GgmlType::Q4_0, quantized(GgmlType::Q4_0, x.data(), 64).data(), 64) == x);

  // F16 and BF16: values with few mantissa bits.
  for (int j = 0; j < 64; ++j) x[j] = std::ldexp(static_cast<float>(j - 32), j % 20 - 10);
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    CAPTURE(name(t));
    CHECK(dequantized(t, quantized(t, x.data(), 64).data(), 64) == x);
  }
}

TEST_CASE("one block of each quantized format, derived by hand") {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);  // -16 .. 15

  SUBCASE("Q4_0") {
    // max = -16 (the first largest magnitude) so d = 2, id = 0.5 and the
    // nibble is trunc(j / 2 + 0.5), clamped to 15 for j = 31.
    const auto q = quantized(GgmlType::Q4_0, x.data(), 32);
    REQUIRE(q.size() == 18);
    CHECK(load_u16(q.data()) == 0x4000);  // fp16 2.0
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>(j / 2.0 + 0.5);
      const int hi = std::min(15, static_cast<int>((j + 16) / 2.0 + 0.5));
      CHECK(q[2 + j] == (lo | hi << 4));
    }
    CHECK(q[2] == 0x80);
    CHECK(q[2 + 15] == 0xf8);
  }
  SUBCASE("Q8_0") {
    // d = 16 / 127; q = round((j - 16) * 127 / 16); the ties at j - 16 = +-8
    // (+-63.5) go away from zero.
    const auto q = quantized(GgmlType::Q8_0, x.data(), 32);
    REQUIRE(q.size() == 34);
    CHECK(load_u16(q.data()) == fp32_to_fp16(16.0f / 127.0f));
    const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 2);
    CHECK(qs[0] == -127);
    CHECK(qs[8] == -64);
    CHECK(qs[16] == 0);
    CHECK(qs[17] == 8);
    CHECK(qs[24] == 64);
    CHECK(qs[31] == 119);  // 15 * 7.9375 = 119.06
  }
}

TEST_CASE("an all-zero block quantizes to scale 0 and dequantizes to zeros") {
  const std::vector<float> zeros(64, 0.0f);
  for (const GgmlType t : kTypes) {
    CAPTURE(name(t));
    const auto y = dequantized(t, quantized(t, zeros.data(), 64).data(), 64);
    CHECK(y == zeros);
  }
}
