// fp16 / bf16 conversions: exhaustive over every half and bf16 value, ties to
// even at every midpoint, the special values, and agreement with F16C where
// the CPU has it.
#include <immintrin.h>

#include <cfloat>
#include <cstring>
#include <ios>
#include <limits>

#include "engine/kernels/format.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The half's value from the format's definition, independently of the code under test.
double half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
  return sign * std::ldexp(static_cast<double>(1024 + mant), exp - 25);
}

__attribute__((target("f16c"))) float hw_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

TEST_CASE("fp16_to_fp32 is exact for every finite half and keeps inf and NaN") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const float f = fp16_to_fp32(hh);
    const int exp = (h >> 10) & 0x1f;
    if (exp == 0x1f) {
      if (h & 0x3ff) {
        CHECK(std::isnan(f));
      } else {
        CHECK(std::isinf(f));
      }
      CHECK(std::signbit(f) == ((h & 0x8000) != 0));
      continue;
    }
    if (static_cast<double>(f) != half_value(hh)) FAIL_CHECK("half 0x" << std::hex << h);
    CHECK(std::signbit(f) == ((h & 0x8000) != 0));  // -0 stays -0
  }
}

TEST_CASE("the fp16 table the kernels read scales from equals fp16_to_fp32 bit for bit") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (bits(fp16_table.value[h]) != bits(fp16_to_fp32(static_cast<uint16_t>(h))))
      FAIL_CHECK("half 0x" << std::hex << h);
  }
}

TEST_CASE("fp32_to_fp16 round-trips every half and rounds every midpoint to even") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(hh));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      CHECK((back & 0x7c00) == 0x7c00);  // NaN stays NaN with its sign
      CHECK((back & 0x3ff) != 0);
      CHECK((back & 0x8000) == (h & 0x8000));
    } else if (back != hh) {
      FAIL_CHECK("round trip of half 0x" << std::hex << h << " gave 0x" << back);
    }
  }
  // Consecutive positive halves a < b (b may be infinity): the midpoint goes to
  // the one with an even mantissa, anything off the midpoint to the nearer one.
  for (uint16_t a = 0; a < 0x7c00; ++a) {
    const auto b = static_cast<uint16_t>(a + 1);
    const double mid = (half_value(a) + (b == 0x7c00 ? 65536.0 : half_value(b))) / 2;
    const auto midf = static_cast<float>(mid);
    REQUIRE(static_cast<double>(midf) == mid);  // midpoints of halves are floats
    const uint16_t even = (a & 1) ? b : a;
    for (const float sign : {1.0f, -1.0f}) {
      const uint16_t s = sign < 0 ? 0x8000 : 0;
      if (fp32_to_fp16(sign * midf) != (even | s)) FAIL_CHECK("midpoint after half 0x" << std::hex << a);
      if (fp32_to_fp16(sign * std::nextafter(midf, 0.0f)) != (a | s))
        FAIL_CHECK("below midpoint after 0x" << std::hex << a);
      if (fp32_to_fp16(sign * std::nextafter(midf, 1e30f)) != (b | s))
        FAIL_CHECK("above midpoint after 0x" << std::hex << a);
    }
  }
}

TEST_CASE("fp32_to_fp16 special values") {
  CHECK(fp32_to_fp16(0.0f) == 0x0000);
  CHECK(fp32_to_fp16(-0.0f) == 0x8000);
  CHECK(fp32_to_fp16(1.0f) == 0x3c00);
  CHECK(fp32_to_fp16(-2.0f) == 0xc000);
  CHECK(fp32_to_fp16(65504.0f) == 0x7bff);
  CHECK(fp32_to_fp16(65519.99f) == 0x7bff);
  CHECK(fp32_to_fp16(65520.0f) == 0x7c00);  // tie with 65536 goes to the even mantissa: infinity
  CHECK(fp32_to_fp16(1e10f) == 0x7c00);
  CHECK(fp32_to_fp16(FLT_MAX) == 0x7c00);
  CHECK(fp32_to_fp16(-FLT_MAX) == 0xfc00);
  CHECK(fp32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(fp32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(fp32_to_fp16(0x1p-14f) == 0x0400);    // smallest normal
  CHECK(fp32_to_fp16(0x1p-24f) == 0x0001);    // smallest subnormal
  CHECK(fp32_to_fp16(0x1p-25f) == 0x0000);    // tie between 0 and 2^-24: even is 0
  CHECK(fp32_to_fp16(0x1.8p-24f) == 0x0002);  // tie between 1 and 2 units: even is 2
  CHECK(fp32_to_fp16(FLT_MIN) == 0x0000);
  CHECK(fp32_to_fp16(1e-45f) == 0x0000);  // a float subnormal
  const uint16_t qnan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  CHECK((qnan & 0x7c00) == 0x7c00);
  CHECK((qnan & 0x0200) != 0);
  const uint16_t snan = fp32_to_fp16(from_bits(0x7f800001));  // payload only in low bits
  CHECK((snan & 0x7c00) == 0x7c00);
  CHECK((snan & 0x3ff) != 0);  // must not turn into infinity
}

TEST_CASE("fp16 conversions agree with F16C on random and special floats") {
  if (!have_avx2("F16C comparison")) return;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = fp16_to_fp32(static_cast<uint16_t>(h)), b = hw_half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      CHECK(std::isnan(a));
    } else if (bits(a) != bits(b)) {
      FAIL_CHECK("half 0x" << std::hex << h);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns cover every exponent; keep NaNs out (payloads may differ).
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    if (fp32_to_fp16(f) != hw_float_to_half(f)) FAIL_CHECK("float bits 0x" << std::hex << bits(f));
  }
}

TEST_CASE("bf16 conversions: exact widening, ties to even, specials") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const float f = bf16_to_fp32(hh);
    REQUIRE(bits(f) == h << 16);
    if (std::isnan(f)) {
      const uint16_t back = fp32_to_bf16(f);
      CHECK((back & 0x7f80) == 0x7f80);
      CHECK((back & 0x7f) != 0);
      continue;
    }
    if (fp32_to_bf16(f) != hh) FAIL_CHECK("round trip of bf16 0x" << std::hex << h);
    // Midpoint to the next bf16 (same sign, larger magnitude) ties to even.
    if ((h & 0x7f80) != 0x7f80) {
      const float mid = from_bits((h << 16) | 0x8000);
      const uint16_t next = static_cast<uint16_t>(h + 1);
      CHECK(fp32_to_bf16(mid) == ((h & 1) ? next : hh));
      CHECK(fp32_to_bf16(from_bits((h << 16) | 0x7fff)) == hh);
      CHECK(fp32_to_bf16(from_bits((h << 16) | 0x8001)) == next);
    }
  }
  CHECK(fp32_to_bf16(-0.0f) == 0x8000);
  CHECK(fp32_to_bf16(FLT_MAX) == 0x7f80);  // above the last midpoint: rounds to infinity
  CHECK(fp32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(fp32_to_bf16(from_bits(0x7f800001)) == 0x7fc0);  // signaling NaN becomes quiet, not infinity
  CHECK(fp32_to_bf16(from_bits(0xffc00000)) == 0xffc0);
  CHECK(fp32_to_bf16(1e-40f) == static_cast<uint16_t>((bits(1e-40f) + 0x7fff + ((bits(1e-40f) >> 16) & 1)) >> 16));
}

TEST_CASE("AVX2 F16 and BF16 activation conversion matches the scalar bits") {
  if (!have_avx2("AVX2 activation conversion")) return;
  std::vector<float> x = random_normal(203, 11, 100.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            65504.0f,
                            65520.0f,
                            -1e10f,
                            0x1p-25f,
                            0x1.8p-24f,
                            0x1p-14f,
                            FLT_MAX,
                            -FLT_MAX,
                            FLT_MIN,
                            1e-40f,
                            std::numeric_limits<float>::infinity(),
                            from_bits(0x3f808000),
                            from_bits(0x3f818000),
                            from_bits(0x7f800001)};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) x[3 * i] = specials[i];
  for (const GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    CAPTURE(name(t));
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{203}}) {
      CAPTURE(n);
      const auto ref = activations(t, Isa::scalar, x.data(), n);
      const auto fast = activations(t, Isa::avx2, x.data(), n);
      CHECK(ref == fast);
    }
  }
}
