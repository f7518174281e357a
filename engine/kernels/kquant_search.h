// The scale searches of ggml's reference K-quant quantizers (ggml-quants.c,
// no importance matrix): given a group of values, find the integer levels L
// and the scale (and min) that fit them best. Scalar only, used by the
// reference quantizers of the K-quants (nearest_int and the magnitude
// searches by the others' too); results follow ggml's arithmetic so that model files we write
// match the reference's bytes as closely as float evaluation allows.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ns::kernels::kq {

// Groups whose largest magnitude is below this quantize to zeros (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23 and
// reading the mantissa. Exact for |v| <= 2^22; callers clamp the result, so
// out-of-range inputs (which ggml only asserts against) end up clamped too.
static inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The largest |x| of n values, and that value with its sign (the first of
// equal magnitudes): the quantizers that map it to their extreme level.
struct Extreme {
  float amax = 0, max = 0;
};
static inline Extreme largest_magnitude(const float* x, int64_t n) {
  Extreme e;
  for (int64_t j = 0; j < n; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > e.amax) {
      e.amax = ax;
      e.max = x[j];
    }
  }
  return e;
}

// The largest |x| of n values (fmax: a NaN is passed over).
static inline float abs_max(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

// make_qx_quants with rmse_type 1 and no importance weights (weights x^2):
// symmetric levels in [-nmax, nmax - 1], stored in L with +nmax; tries 18
// scales around nmax / max and keeps the best weighted least-squares fit.
// Returns the scale (0 for an all-zero group).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L);

// make_q3_quants with do_rmse: symmetric levels in [-nmax, nmax - 1] (stored
// with +nmax), refined one element at a time for up to 5 rounds.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// make_qkx2_quants: levels in [0, nmax] with x ~ scale * L - the_min, a
// weighted fit over nstep + 1 candidate scales (rmin + rdelta * is + nmax) /
// (max - min). *the_min >= 0. Laux is scratch of n bytes.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad);

// The last step of Q3_K's and Q6_K's quantizers: the values of each 16-value
// sub-block j re-quantized with the stored scale d * sc[j], to levels in
// [-nmax, nmax - 1] stored with +nmax; a sub-block whose stored scale is zero
// keeps the levels of the fit.
static inline void requantize_sub_blocks16(const float* src, float d, const int8_t* sc, int nmax, int8_t* levels) {
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(sc[j]);
    if (dl == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = nearest_int(src[16 * j + i] / dl);
      levels[16 * j + i] = static_cast<int8_t>((l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l)) + nmax);
    }
  }
}

// Q2_K's and Q3_K's low 2 bits of a block's 256 levels: byte 32 h + l holds
// elements 128 h + l, + 32, + 64 and + 96 in bits 0-1, 2-3, 4-5 and 6-7.
template <class Level>
static inline void pack_2bit_planes(const Level* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const Level* lv = levels + 128 * h;
    for (int l = 0; l < 32; ++l)
      qs[32 * h + l] = static_cast<uint8_t>(lv[l] | (lv[l + 32] << 2) | (lv[l + 64] << 4) | (lv[l + 96] << 6));
  }
}

}  // namespace ns::kernels::kq
