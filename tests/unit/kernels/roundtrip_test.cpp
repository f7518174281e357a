// quantize -> dequantize round trips: per-element error bounds that follow
// from each format's definition, exact round trips of values on the grid, and
// hand-derived bytes of one block of each quantized format.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

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

// The E2M1 formats (MXFP4, NVFP4): in units u of the stored scale the levels
// are 0, 1, 2, 3, 4, 6, 8, 12, so x is within half a gap of its nearest level,
// or beyond the top one by |x| - 12 u; u = 0 stores zeros.
double e2m1_bound(double x, double u) {
  if (u == 0) return std::fabs(x);
  const double a = std::fabs(x) / u;
  const double units = a > 12 ? a - 12 : a > 8 ? 2 : a > 4 ? 1 : 0.5;
  return units * u * (1 + 1e-6);
}

// For each {amax, byte} of `cases`: a block of `n` zeros but x[at] = -amax
// quantizes (as `type`) to that scale byte first, and the `zero_scales` bytes
// after it (the other sub-blocks' scales) are 0.
void check_scale_byte(GgmlType type, int n, int at, std::span<const std::pair<float, int>> cases, int zero_scales = 0) {
  for (const auto& [amax, e] : cases) {
    CAPTURE(amax);
    std::vector<float> x(static_cast<size_t>(n), 0.0f);
    x[static_cast<size_t>(at)] = -amax;
    const auto q = quantized(type, x.data(), n);
    CHECK(q[0] == e);
    for (int i = 1; i <= zero_scales; ++i) CHECK(q[static_cast<size_t>(i)] == 0);
  }
}

}  // namespace

TEST_CASE("round trip error stays within each format's bound") {
  const int64_t n = 32 * 60;
  const auto x = varied_row(n, 1);
  for (const GgmlType t : kTypes) {
    if (block_elems(t) > 32) continue;  // K-quants: their own test below
    CAPTURE(name(t));
    const auto q = quantized(t, x.data(), n);
    const auto y = dequantized(t, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float* xb = x.data() + b * 32;
      const float* yb = y.data() + b * 32;
      float amax = 0, max = 0, lo = xb[0], hi = xb[0];
      for (int j = 0; j < 32; ++j) {
        if (std::fabs(xb[j]) > amax) {
          amax = std::fabs(xb[j]);
          max = xb[j];
        }
        lo = std::min(lo, xb[j]);
        hi = std::max(hi, xb[j]);
      }
      for (int j = 0; j < 32; ++j) {
        const double err = std::fabs(static_cast<double>(xb[j]) - yb[j]);
        double bound = 0;
        switch (t) {
          case GgmlType::F32: bound = 0; break;
          case GgmlType::F16: bound = std::max(std::fabs(xb[j]) * 0x1p-11, 0x1p-25); break;  // subnormal halves: 2^-25
          case GgmlType::BF16: bound = std::fabs(xb[j]) * 0x1p-8; break;
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
          case GgmlType::Q5_0: {
            // As Q4_0 with positions in [-16, 16]; 16 is clamped to 15.
            const double d = std::fabs(max) / 16.0;
            const double pos = max != 0 ? -16.0 * xb[j] / max : 0.0;
            bound = (d * (pos > 15.5 ? 1.0 : 0.5) + 16 * half_rounding(d)) * (1 + 1e-6);
            break;
          }
          case GgmlType::Q4_1:
          case GgmlType::Q5_1: {
            // x = min + q d with q rounded from (x - min) / d: half a step,
            // plus the fp16 rounding of d (times q) and of min.
            const double levels = t == GgmlType::Q4_1 ? 15 : 31;
            const double d = (static_cast<double>(hi) - lo) / levels;
            bound = (d * 0.5 + levels * half_rounding(d) + half_rounding(lo)) * (1 + 1e-6);
            break;
          }
          case GgmlType::IQ4_NL: {
            // Levels are chosen under d0 = max / -127: within half the widest
            // gap (24) of the scaled table, or up to 14 d0 beyond its ends
            // (113 vs 127); then stored with the fitted scale d, moving a
            // level v by |d - d0| |v| <= 127 |d - d0|.
            const double d0 = std::fabs(max) / 127.0;
            const double d = load_fp16(q.data() + b * iq4_nl::kBlockBytes);
            bound = (14 * d0 + 127 * std::fabs(std::fabs(d) - d0)) * (1 + 1e-5) + 1e-30;
            break;
          }
          case GgmlType::MXFP4: {
            // In units u of the stored scale (amax / u in [8, 16), or [4, 8)
            // where log2f rounds amax up to a power of two) the levels are 0,
            // 1, 2, 3, 4, 6, 8, 12: within half a gap of a nearest level, or
            // beyond the top one by |x| - 12 u.
            bound = e2m1_bound(xb[j], mxfp4::scale(q[static_cast<size_t>(b) * mxfp4::kBlockBytes]));
            if (amax > 0) {
              // 2^e = 2 u = 2^(floor(log2f(amax)) - 2): amax's exponent, or one below where log2f rounded up.
              const int e = q[static_cast<size_t>(b) * mxfp4::kBlockBytes] - 127;
              CHECK((e + 2 == std::ilogb(amax) || e + 1 == std::ilogb(amax)));
            }
            break;
          }
          default: FAIL("untested type");
        }
        if (err > bound) FAIL_CHECK("block " << b << " element " << j << ": " << xb[j] << " -> " << yb[j]);
      }
    }
  }
}

TEST_CASE("Q1_0, Q2_0 and NVFP4 round trips stay within each format's bound") {
  // varied_row changes magnitude every 32 elements, so each block of these
  // formats mixes scales (and a zero run) the way real rows rarely do.
  const int64_t n = 128 * 15;
  const auto x = varied_row(n, 2);
  for (const GgmlType t : kMultiBlockTypes) {
    CAPTURE(name(t));
    const int64_t be = block_elems(t);
    const size_t bytes = ns::gguf::traits(t).block_bytes;
    const auto q = quantized(t, x.data(), n);
    const auto y = dequantized(t, q.data(), n);
    for (int64_t b = 0; b < n / be; ++b) {
      CAPTURE(b);
      const float* xb = x.data() + b * be;
      const float* yb = y.data() + b * be;
      const uint8_t* blk = q.data() + b * bytes;
      float sum_abs = 0, amax = 0;
      for (int64_t j = 0; j < be; ++j) {
        sum_abs += std::fabs(xb[j]);
        amax = std::max(amax, std::fabs(xb[j]));
      }
      if (t == GgmlType::Q1_0) {
        // d = fp16(mean |x|), then every element is +-d by its sign: exact.
        const float d = load_fp16(blk);
        CHECK(load_u16(blk) == fp32_to_fp16(sum_abs / 128.0f));
        for (int64_t j = 0; j < be; ++j) CHECK(yb[j] == (xb[j] >= 0 ? d : -d));
      } else if (t == GgmlType::Q2_0) {
        // d = fp16(amax); x / amax rounds to -1, 0 or 1 (code 2d is unused).
        const double d = load_fp16(blk);
        CHECK(std::fabs(d - amax) <= half_rounding(amax));
        const double bound = (amax * 0.5 + std::fabs(d - amax)) * (1 + 1e-6);
        for (int64_t j = 0; j < be; ++j) {
          CHECK(std::fabs(static_cast<double>(xb[j]) - yb[j]) <= bound);
          CHECK(yb[j] != static_cast<float>(2 * d));
        }
      } else {
        // Per 16-element sub-block: its UE4M3 byte, then MXFP4's nearest-code rule.
        for (int64_t j = 0; j < be; ++j) {
          const double u = nvfp4::scale(blk[j / nvfp4::kSubElems]);
          if (std::fabs(static_cast<double>(xb[j]) - yb[j]) > e2m1_bound(xb[j], u))
            FAIL_CHECK("element " << j << ": " << xb[j] << " -> " << yb[j] << " (scale unit " << u << ")");
        }
      }
    }
  }
}

TEST_CASE("NVFP4's UE4M3 scales: every byte against the format's definition, and the quantizer's rounding") {
  // UE4M3: 4 exponent bits (bias 7), 3 mantissa bits, exponent 0 subnormal;
  // the kernels hold half the value (the doubled E2M1 table). ggml reads bit 7
  // as nothing and 0x7f (E4M3's NaN) as 0.
  for (int e = 0; e < 256; ++e) {
    CAPTURE(e);
    const int ex = (e >> 3) & 15, m = e & 7;
    const double value = ex == 0 ? std::ldexp(m, -9) : std::ldexp(1 + m / 8.0, ex - 7);
    CHECK(nvfp4::scale(static_cast<uint8_t>(e)) == static_cast<float>(e == 0x7f ? 0 : value / 2));
  }
  // amax / 6 -> the scale byte: normal values round their mantissa half up;
  // exponent field 15 and above (>= 256) give 0x7e (448); subnormal steps of
  // 2^-9 round half up, below half a step to 0.
  const std::pair<float, int> cases[] = {
      {6.0f, 0x38},                // 1.0: exponent 7, mantissa 0
      {6.0f * 1.0625f, 0x39},      // 1 + 1/16: exactly half a step, rounded up
      {6.0f * 1.125f, 0x39},       // 1 + 1/8
      {6.0f * 1.9375f, 0x40},      // 1 + 15/16: rounds up into the next binade, 2.0
      {6.0f * 300.0f, 0x7e},       // exponent field 15: 448
      {6.0f * 1000.0f, 0x7e},      // clamped to 448
      {6.0f * 0x1p-10f, 0x01},     // 2^-10 = one subnormal step of 2^-9, half of it: (int)(0.5 + 0.5) = 1
      {6.0f * 0x1p-12f, 0x00},     // a quarter step: 0
      {6.0f * 3 * 0x1p-9f, 0x03},  // three subnormal steps
      {0.0f, 0x00},
  };
  check_scale_byte(GgmlType::NVFP4, 64, 3, cases, 1);  // the next sub-block is zero
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

  // Q5_0: d = -max / 16 = 1/8 with max = -2; codes 0..31 are -16..15 steps.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 7) % 32 - 16) * 0.125f;
  x[0] = -16 * 0.125f;
  x[32] = -16 * 0.125f;
  CHECK(dequantized(GgmlType::Q5_0, quantized(GgmlType::Q5_0, x.data(), 64).data(), 64) == x);

  // Q4_1 / Q5_1: min = -2 and max = min + levels * d with d a power of two.
  for (const GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1}) {
    CAPTURE(name(t));
    const int levels = t == GgmlType::Q4_1 ? 15 : 31;
    for (int j = 0; j < 64; ++j) x[j] = -2.0f + static_cast<float>((j * 7) % (levels + 1)) * 0.25f;
    for (const int b : {0, 32}) {
      x[b + 1] = -2.0f;
      x[b + 2] = -2.0f + static_cast<float>(levels) * 0.25f;
    }
    CHECK(dequantized(t, quantized(t, x.data(), 64).data(), 64) == x);
  }

  // IQ4_NL: d * level with d a power of two and the level -127 present (it
  // sets the scale); the least-squares fit then finds d again.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(iq4_nl::kValues[(j * 5) % 16]) * 0x1p-6f;
  x[9] = -127 * 0x1p-6f;
  x[41] = -127 * 0x1p-6f;
  CHECK(dequantized(GgmlType::IQ4_NL, quantized(GgmlType::IQ4_NL, x.data(), 64).data(), 64) == x);

  // MXFP4: levels in units of 2^-7 with the top level 12 present, which puts
  // the block's exponent at 2^-7 per unit (amax = 1.5 * 2^-4).
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(mxfp4::kValues[(j * 5) % 16]) * 0x1p-7f;
  x[9] = -12 * 0x1p-7f;
  x[41] = 12 * 0x1p-7f;
  CHECK(dequantized(GgmlType::MXFP4, quantized(GgmlType::MXFP4, x.data(), 64).data(), 64) == x);

  // Q1_0: every magnitude equal, so the mean is it exactly.
  std::vector<float> x128(128);
  for (int j = 0; j < 128; ++j) x128[j] = (j * 7) % 3 ? 0.375f : -0.375f;
  CHECK(dequantized(GgmlType::Q1_0, quantized(GgmlType::Q1_0, x128.data(), 128).data(), 128) == x128);

  // Q2_0: -d, 0, d with d (the block's largest magnitude) a power of two.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 5) % 3 - 1) * 0.5f;
  CHECK(dequantized(GgmlType::Q2_0, quantized(GgmlType::Q2_0, x.data(), 64).data(), 64) == x);

  // NVFP4: per sub-block, levels in units of 2^-7 with the top level 12
  // present: amax / 6 = 2^-6 is a UE4M3 value, so the unit is 2^-7 exactly.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(mxfp4::kValues[(j * 5) % 16]) * 0x1p-7f;
  for (const int s : {0, 16, 32, 48}) x[s + 5] = (s / 16 % 2 ? -12 : 12) * 0x1p-7f;
  CHECK(dequantized(GgmlType::NVFP4, quantized(GgmlType::NVFP4, x.data(), 64).data(), 64) == x);

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
  SUBCASE("Q5_0") {
    // max = -16 so d = 1, id = 1 and code(j) = trunc(j - 16 + 16.5) = j: the
    // low nibbles are j % 16, the fifth bits j / 16, i.e. qh = 0xffff0000.
    const auto q = quantized(GgmlType::Q5_0, x.data(), 32);
    REQUIRE(q.size() == 22);
    CHECK(load_u16(q.data()) == 0x3c00);
    uint32_t qh;
    std::memcpy(&qh, q.data() + 2, 4);
    CHECK(qh == 0xffff0000u);
    for (int j = 0; j < 16; ++j) CHECK(q[6 + j] == (j | j << 4));
  }
  SUBCASE("Q4_1") {
    // min = -16, d = 31 / 15, code(j) = trunc(j * 15 / 31 + 0.5).
    const auto q = quantized(GgmlType::Q4_1, x.data(), 32);
    REQUIRE(q.size() == 20);
    CHECK(load_u16(q.data()) == fp32_to_fp16(31.0f / 15.0f));
    CHECK(load_u16(q.data() + 2) == fp32_to_fp16(-16.0f));
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>(j * 15.0 / 31.0 + 0.5);
      const int hi = static_cast<int>((j + 16) * 15.0 / 31.0 + 0.5);
      CHECK(q[4 + j] == (lo | hi << 4));
    }
  }
  SUBCASE("Q8_K") {
    // 256 values -128..127: the first largest magnitude is -128, so the scale
    // is -127 / -128 and q = nearest(x * 127 / 128), ties to even: 64 * 127 /
    // 128 = 63.5 goes to 64 and -63.5 to -64 (Q8_0 would give -64 and 64 too,
    // but 31.75 -> 32 and 127 -> 126 show the scale).
    std::vector<float> v(256);
    for (int j = 0; j < 256; ++j) v[j] = static_cast<float>(j - 128);
    std::vector<uint8_t> q(292);
    find_format(GgmlType::Q8_K)->quantize(v.data(), q.data(), 256);
    float d;
    std::memcpy(&d, q.data(), 4);
    CHECK(d == 1 / (-127.0f / -128.0f));
    const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 4);
    CHECK(qs[0] == -127);
    CHECK(qs[128 - 64] == -64);
    CHECK(qs[128 + 64] == 64);
    CHECK(qs[128 + 32] == 32);
    CHECK(qs[128 + 1] == 1);
    CHECK(qs[255] == 126);
    CHECK(qs[128] == 0);
    for (int g = 0; g < 16; ++g) {
      int16_t bsum;
      std::memcpy(&bsum, q.data() + 260 + 2 * g, 2);
      int expected = 0;
      for (int j = 0; j < 16; ++j) expected += qs[16 * g + j];
      CHECK(bsum == expected);
    }
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

TEST_CASE("MXFP4 blocks derived by hand from the OCP MX format") {
  // E2M1 code s e1 e0 m: sign s, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; E8M0
  // byte e: 2^(e - 127). Derived from those definitions, not from the
  // kernel's doubled table.
  const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  auto value = [&](int code, int e) { return (code & 8 ? -1 : 1) * std::ldexp(e2m1[code & 7], e - 127); };

  SUBCASE("dequantize: every code under exponents from 2^-127 to 2^127") {
    for (const int e : {0, 1, 2, 3, 100, 126, 127, 128, 129, 200, 251, 252, 253, 254, 255}) {
      CAPTURE(e);
      std::vector<uint8_t> blk(mxfp4::kBlockBytes);
      blk[0] = static_cast<uint8_t>(e);
      for (int j = 0; j < 16; ++j) blk[1 + j] = static_cast<uint8_t>(j | (15 - j) << 4);  // codes j, then 15 - j
      const auto y = dequantized(GgmlType::MXFP4, blk.data(), 32);
      for (int j = 0; j < 32; ++j) {
        CAPTURE(j);
        const double expected = value(j < 16 ? j : 31 - j, e);
        if (std::fabs(expected) > FLT_MAX) {  // 6 * 2^126 and up: inf, as ggml's float product gives
          CHECK(std::isinf(y[j]));
          CHECK(std::signbit(y[j]) == (expected < 0));
        } else {
          CHECK(y[j] == static_cast<float>(expected));  // exact, subnormals (e = 0, 1) included; -0 reads as 0
        }
      }
    }
  }
  SUBCASE("quantize: the exponent and each value's nearest code") {
    // amax = 16: e = floor(log2 16) - 2 + 127 = 129, so one scale unit is 2
    // and x is -8 .. 7.5 of the doubled levels 0, 1, 2, 3, 4, 6, 8, 12.
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
    const auto q = quantized(GgmlType::MXFP4, x.data(), 32);
    REQUIRE(q.size() == mxfp4::kBlockBytes);
    CHECK(q[0] == 129);
    // Nearest magnitude, ties to the smaller one; the sign bit only on nonzero codes.
    auto code = [&](float v) {
      const double a = std::fabs(v) / 2.0;
      int best = 0;
      for (int k = 1; k < 8; ++k)
        if (std::fabs(2 * e2m1[k] - a) < std::fabs(2 * e2m1[best] - a)) best = k;
      return best | (v < 0 && best != 0 ? 8 : 0);
    };
    for (int j = 0; j < 16; ++j) CHECK(q[1 + j] == (code(x[j]) | code(x[j + 16]) << 4));
    CHECK((q[1] & 0x0f) == 14);      // -16: -8 units, -4.0 in E2M1
    CHECK((q[1 + 2] & 0x0f) == 13);  // -14: -7 units, a tie of -6 and -8: the smaller magnitude
    CHECK((q[1 + 15] >> 4) == 6);    // 15: 7.5 units, nearest 8
    CHECK((q[1 + 0] >> 4) == 0);     // 0: code 0, not -0
  }
  SUBCASE("quantize: exponents at the ends of the range") {
    const std::pair<float, int> cases[] = {
        {0.0f, 0},       // all zero
        {1.0f, 125},     // 2^0: 2^-2 per level-2 step
        {FLT_MAX, 252},  // floor(log2) = 127
        {0x1p-125f, 0},  // floor(log2) = -125: 0
        {0x1p-126f, 0},  // ggml's cast would go negative: clamped to 0
        {0x1p-140f, 0},  // subnormal
        // Just below a power of two: log2f (ggml's, and ours) gives exactly
        // 4 and -100, one above amax's own exponent; just below 1 it keeps -2^-24.
        {std::nextafter(16.0f, 0.0f), 129},
        {std::nextafter(0x1p-100f, 0.0f), 25},
        {std::nextafter(1.0f, 0.0f), 124},
    };
    check_scale_byte(GgmlType::MXFP4, 32, 7, cases);
  }
}

TEST_CASE("an all-zero block quantizes to scale 0 and dequantizes to zeros") {
  const std::vector<float> zeros(512, 0.0f);
  for (const GgmlType t : kTypes) {
    CAPTURE(name(t));
    const auto y = dequantized(t, quantized(t, zeros.data(), 512).data(), 512);
    CHECK(y == zeros);
  }
}
