// Unpacking helpers shared by the AVX2 kernels of the nibble-packed formats
// (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, IQ4_XS) and of the K-quants. Like avx2_util.h, only
// *_avx2.cpp files include this, and everything is static.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/avx2_util.h"

namespace ns::kernels::avx2 {

// 16 bytes of nibbles to 32 bytes in element order: byte j's low nibble is
// element j, its high nibble element j + 16. Both 128-bit lanes get the
// bytes; the upper one is shifted right by 4 before the mask.
static inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

// The 32 bits at p to 32 bytes: byte j is 0xff where bit j is set, else 0.
static inline __m256i expand_bits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  // Byte j takes source byte j / 8 (the shuffle works per 128-bit lane, and
  // each lane holds all four source bytes), then tests its own bit j % 8.
  const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i picked = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), which), bit);
  return _mm256_cmpeq_epi8(picked, bit);
}

// 16 bytes of nibbles at qs looked up in a 16-entry int8 table: the table
// formats' weights in element order.
static inline __m256i lookup_nibbles(const int8_t* values, const uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  return _mm256_shuffle_epi8(table, unpack_nibbles(qs));
}

// Q5_0 / Q5_1 codes: the nibbles at qs with the 32 fifth bits at qh as 0x10.
static inline __m256i unpack_5bit(const uint8_t* qh, const uint8_t* qs) {
  return _mm256_or_si256(unpack_nibbles(qs), _mm256_and_si256(expand_bits(qh), _mm256_set1_epi8(0x10)));
}

// One block of 32 floats as ggml's x86 Q8_0 / Q8_1 quantizers take it:
// q[i] holds elements 8i..8i+7 as int32, x * (127 / amax) rounded half to
// even; returns amax.
static inline float quantize_q8_lanes(const float* src, __m256i (&q)[4]) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(src + 8 * i);
  __m256 amax8 = _mm256_andnot_ps(sign_bit, v[0]);
  for (int i = 1; i < 4; ++i) amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, v[i]));
  __m128 amax4 = _mm_max_ps(_mm256_extractf128_ps(amax8, 1), _mm256_castps256_ps128(amax8));
  amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
  amax4 = _mm_max_ss(amax4, _mm_movehdup_ps(amax4));
  const float amax = _mm_cvtss_f32(amax4);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  for (int i = 0; i < 4; ++i)
    q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return amax;
}

// quantize_q8_lanes' values as 32 int8 in element order (the packs work per
// 128-bit lane; the permute puts the bytes back in order).
static inline __m256i pack_q8(const __m256i (&q)[4]) {
  const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
  const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Shuffle masks over 8 int16 values held in both 128-bit lanes (K-quant
// sub-block scales): pick_pair(k) puts value 2k in every int16 of the low
// lane and value 2k + 1 in the high lane (the two 16-element sub-blocks of a
// 32-element vector); pick_one(i) puts value i in all 16.
static inline __m256i pick_pair(int k) {
  const char lo = static_cast<char>(4 * k), hi = static_cast<char>(4 * k + 2);
  return _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                          lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1,
                          hi, hi + 1);
}

static inline __m256i pick_one(int i) { return _mm256_set1_epi16(static_cast<int16_t>((2 * i) | ((2 * i + 1) << 8))); }

// Q4_K / Q5_K: the 8 six-bit scales and 8 mins (12 bytes at p) as int16,
// the scales in both 128-bit lanes of *scales, the mins in *mins. The same
// bits as kq::unpack_k4_scales, four bytes at a time (ggml's utmp shuffle).
static inline void unpack_k4_scales(const uint8_t* p, __m256i* scales, __m128i* mins) {
  uint32_t u[4];
  std::memcpy(u, p, 12);
  const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
  u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  const uint32_t mins_lo = u[1] & m6;
  u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  u[2] = mins_lo;
  u[0] &= m6;
  const __m128i bytes =
      _mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]), static_cast<int>(u[1]), static_cast<int>(u[0]));
  *scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes));
  *mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(bytes, bytes));
}

// Q8_K's 16 bsums summed in pairs: the sums of its 8 runs of 32 as int16
// (|sum| <= 32 * 127), in the order ggml's Q4_K / Q5_K kernels use them.
static inline __m128i q8k_sums32(const uint8_t* bsums) {
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  return _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

}  // namespace ns::kernels::avx2
