// The AVX-512 + VNNI kernel of the formats whose 32-element blocks are dotted
// against Q8_0 activations as exact int8 products, one scale per block: Q8_0,
// Q4_0, IQ4_NL and MXFP4. Only *_avx512.cpp files include this (it needs
// -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni on top of AVX2's
// flags); everything is static or a template over a format type of the
// including file's anonymous namespace, so no copy is shared with a file
// compiled for a lesser CPU (see avx2_util.h).
//
// The integer products: vpdpbusd multiplies unsigned bytes by signed bytes
// and adds groups of four products to an int32 lane. Of the ways to feed it
// signed weights, this kernel uses unsigned weights with an offset: a format
// decodes a weight block to bytes u = w + o, o = 8 for Q4_0 (the nibbles as
// stored) and 128 for the int8-valued formats (Q8_0 with its sign bit
// flipped, IQ4_NL and MXFP4 by looking up a table of level + 128). Then
// sum(u * x) = sum(w * x) + o * sum(x), and o * sum(x) per group of four is
// itself one vpdpbusd of o-bytes with x: computed once per activation block,
// shared by the R weight rows of a micro-tile, and negated, it is the value
// each row's vpdpbusd starts from, so one instruction per row x token leaves
// sum(w * x) per group of four, exactly (|o * sum4 x| + 4 * 255 * 127 < 2^31;
// Q8_0 weights of -128, which the quantizers never write, are exact too).
// The alternatives cost more here: sign transfer has no 512-bit vpsignb (a
// masked subtract per row x token), and offsetting the activations needs a
// per-row correction from the weights, which change at every block while
// several tokens share one decoded row.
//
// The float side repeats the AVX2 kernel's operations exactly, so the two
// paths give the same bits (the int32 lanes are the same sums of four
// products, the scale the same d_w * d_x): Q8_0 and Q4_0 (kEvenOdd false)
// run one block at a time in 256-bit registers, one accumulator over the
// blocks in order, as their AVX2 kernels do; IQ4_NL and MXFP4 (kEvenOdd
// true) put two blocks in a 512-bit register, int32 lanes 0-7 block b and
// 8-15 block b + 1, with one scale vector holding each block's product in its
// half: the halves are block32_avx2.h's even and odd accumulators, and an odd
// last block is added to their total as there. Per row x token and block:
// vpdpbusd, convert, the scale product, FMA (AVX2: sign, maddubs, madd,
// convert, multiply, FMA). On Zen 4 a 512-bit operation costs two 256-bit
// ones, so the gain there is VNNI's, not the width's.
//
// Each weight block of the micro-tile's R rows is decoded once for its T
// tokens, and each activation block loaded once for the R rows; the next
// micro-tile's rows are prefetched (avx2_util.h has the measurements).
//
// A format is its AVX2 block decoder (block32_avx2.h): kBlockBytes, kEvenOdd,
// scale(block) (the weight block's scale as a float), and the bytes u of one
// 256-bit half: decode(block) for the unsigned formats (o = kOffset),
// decode_u(block) for the signed ones (o = 128).
#pragma once

// GCC 12's AVX-512 intrinsics pass a self-initialised "undefined" vector as
// the unused merge source (_mm512_cvtepi32_ps, _mm512_inserti64x4, ...), which
// its uninitialized-use analysis reports once inlined (GCC bug 105593, fixed
// in GCC 13). The including *_avx512.cpp files are only these kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::avx512 {

// The two halves of a 512-bit register from two 256-bit ones.
static inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// a in float lanes 0-7, b in lanes 8-15.
static inline __m512 halves(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }

template <class F, int R, int T>
struct Int8Micro {
  static_assert(!F::kMin, "x is Q8_0");
  static constexpr size_t kWBytes = F::kBlockBytes;
  static constexpr size_t kXBytes = q8_0::kBlockBytes;
  static constexpr int kOffset = F::kSigned ? 128 : F::kOffset;

  static inline __m256i decode(const uint8_t* block) {
    if constexpr (F::kSigned) {
      return F::decode_u(block);
    } else {
      return F::decode(block);
    }
  }

  // Blocks b and b + 1 of R rows x T tokens into acc (kEvenOdd formats).
  static inline void pair(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b, __m512 (&acc)[R][T]) {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(kOffset));
    __m512i u[R];
    __m512 dw[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * ws + b * kWBytes;
      avx2::prefetch_next_rows(wb, R, ws);
      if constexpr (2 * kWBytes > 64) avx2::prefetch_next_rows(wb + 64, R, ws);
      u[r] = join(decode(wb), decode(wb + kWBytes));
      dw[r] = halves(F::scale(wb), F::scale(wb + kWBytes));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m512i xq = join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXBytes + 2)));
      const __m512 dx = halves(load_fp16(xb), load_fp16(xb + kXBytes));
      const __m512i zero = _mm512_setzero_si512();
      const __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, offset, xq));  // -o * sum4(x)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, u[r], xq));
        acc[r][t] = _mm512_fmadd_ps(p, _mm512_mul_ps(dw[r], dx), acc[r][t]);
      }
    }
  }

  // Block b alone in 256-bit registers (vpdpbusd on ymm, AVX512_VL): each
  // row x token's exact int32 lanes go to f(r, t, p, d_w * d_x).
  template <class Fn>
  static inline void one_block(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b, Fn&& f) {
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(kOffset));
    const __m256i zero = _mm256_setzero_si256();
    __m256i u[R];
    __m256 dw[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * ws + b * kWBytes;
      avx2::prefetch_next_rows(wb, R, ws);
      u[r] = decode(wb);
      dw[r] = _mm256_set1_ps(F::scale(wb));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
      const __m256 dx = _mm256_set1_ps(load_fp16(xb));
      const __m256i start = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, offset, xq));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) f(r, t, _mm256_dpbusd_epi32(start, u[r], xq), _mm256_mul_ps(dw[r], dx));
    }
  }

  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    const int64_t nb = n / q8_0::kBlockElems;
    if constexpr (!F::kEvenOdd) {
      // One accumulator per row x token over the blocks in order, then
      // avx2::hsum: the AVX2 kernel's float operations exactly.
      __m256 acc[R][T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        one_block(w, ws, x, xs, b, [&acc](int r, int t, __m256i p, __m256 d) {
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc[r][t]);
        });
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]);
    } else {
      // Even blocks in the low half, odd ones in the high half: the AVX2
      // table kernel's two accumulators; an odd last block's exact sum is
      // added to their total as there.
      __m512 acc[R][T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
      int64_t b = 0;
      for (; b + 1 < nb; b += 2) pair(w, ws, x, xs, b, acc);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          y[t * ys + r] =
              avx2::hsum(_mm256_add_ps(_mm512_castps512_ps256(acc[r][t]), _mm512_extractf32x8_ps(acc[r][t], 1)));
      if (b < nb) {
        one_block(w, ws, x, xs, b,
                  [y, ys](int r, int t, __m256i p, __m256 d) { avx2::add_block_total(y[t * ys + r], p, d); });
      }
    }
  }
};

// Micro-tile shapes: 4 rows x 4 tokens (a lone token: 4 rows). Measured
// with ns_bench_kernels on one thread of a shared 2-core AMD EPYC (Zen 4) VM,
// 4096 x 4096, two interleaved rounds, ms per call for 4 x 4 vs 2 x 8:
//   64 tokens: Q4_0 28.8, 19.8 vs 33.6, 29.0; Q8_0 27.7, 19.7 vs 33.1, 30.2;
//              MXFP4 29.0, 20.6 vs 34.5, 30.8
//   16 tokens: Q4_0 6.9, 5.2 vs 5.4, 5.4; Q8_0 6.6, 5.1 vs 10.7, 5.9
// (this machine's load moves single figures by 30 % or more).
inline constexpr int kRowsSingle = 4, kRowsBatch = 4, kTokens = 4;

// The vec_dot and tile entry points of format F.
template <class F>
using Int8Kernels = avx2::KernelsOf<Int8Micro, F, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace ns::kernels::avx512
