// Bit-exact fp16 and bf16 conversions for the scalar code (the public
// fp16_to_fp32 & co. in half.cpp wrap these). Round-to-nearest-even on the way
// down, subnormals kept, overflow to infinity, NaN stays a (quiet) NaN.
// static: see format.h on why nothing here may have external linkage; the
// functions are constexpr so half.cpp can build the fp16 table at compile time.
#pragma once

#include <bit>
#include <cstdint>

namespace ns::kernels {

static constexpr uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }
static constexpr float bits_float(uint32_t u) { return std::bit_cast<float>(u); }

static constexpr float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return bits_float(sign | float_bits(mag));
  }
  return bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

static constexpr uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                         // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {
    // Normal half: round the 13 dropped bits to nearest even; a carry into the
    // exponent is the correct result.
    const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - ((127u - 15u) << 23)) >> 13));
  }
  // Subnormal half (or zero): adding 0.5 puts the value's 2^-24 units in the
  // low mantissa bits and lets the FPU round them to nearest even.
  const float shifted = bits_float(ax) + 0.5f;
  return static_cast<uint16_t>(sign | (float_bits(shifted) - float_bits(0.5f)));
}

static constexpr float bf16_bits_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

static constexpr uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace ns::kernels
