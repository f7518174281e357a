// The AVX2 micro-kernel shared by the i-quants (weights x Q8_K). Every
// i-quant decodes, sub-block by sub-block, to 32 int8 weights w with an
// integer scale per 16 of them; its dot with Q8_K is then, per super-block,
// one exact integer sum times d_w * d_x, and a constant factor at the end.
// A format supplies a decoder D:
//   D::kBytes            block bytes
//   D::kFactor           the constant the float sum is multiplied by at the end
//   D::scale(blk)        d_w as a float
//   D::decode(blk, v, &wabs, &wsign, &sc)
//                        sub-block v: |w| as unsigned bytes, a vector whose
//                        bytes carry w's signs (nonzero where w is), and the
//                        scales as int16: lanes 0..7 for elements 0..15,
//                        lanes 8..15 for elements 16..31.
// Per sub-block, row and token: maddubs(|w|, x with w's sign) gives exact pair
// sums (|w| * 127 * 2 <= 32767 for every i-quant's levels), madd with the
// scales sums them to int32. The decode of a row's sub-block is shared by T
// tokens, each activation load by R rows (see avx2_util.h).
// Only *_avx2.cpp files include this; everything is static or a template.
#pragma once

#include <immintrin.h>

#include "engine/kernels/avx2_util.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq_avx2 {

template <class D, int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    using XL = kq::Q8K;
    const int64_t nb = n / iq::kElems;
    __m256 acc[R][T];
    avx2::zero_tile(acc);

    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = w + b * D::kBytes;
      const uint8_t* xb = x + b * XL::bytes;
      avx2::prefetch_next_blocks<R>(wb, ws, D::kBytes);
      __m256i sum[R][T];
      avx2::zero_tile(sum);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m256i wabs[R], wsign[R], sc[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) D::decode(wb + r * ws, v, &wabs[r], &wsign[r], &sc[r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + t * xs + XL::qs + 32 * v));
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const __m256i p = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(q8, wsign[r]));
            sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(p, sc[r]));
          }
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const float dx = kq::load_f32(xb + t * xs + XL::d);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_set1_ps(dx * D::scale(wb + r * ws)), _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t * ys + r] = D::kFactor * avx2::hsum(acc[r][t]);
  }
};

// The fields of a decoder whose super-block scale is the fp16 at byte L::d of
// an L::bytes block (an iquant.h layout), with its final factor. In an
// anonymous namespace: each file instantiates it for itself (see avx2_util.h).
namespace {
template <class L, float kF>
struct Fp16Super {
  static constexpr size_t kBytes = L::bytes;
  static constexpr float kFactor = kF;
  static float scale(const uint8_t* blk) { return load_fp16(blk + L::d); }
};
}  // namespace

// Shapes as the K-quants' (kquant_avx2.cpp): 4 rows for a lone token, 2 x 4 otherwise.
inline constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 4;

template <class D>
using Kernels = avx2::KernelsOf<Micro, D, kRowsSingle, kRowsBatch, kTokens>;

// The scale of 16 int16 lanes: lo for elements 0..15, hi for 16..31.
static inline __m256i scale_halves(int lo, int hi) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(lo)), _mm_set1_epi16(static_cast<int16_t>(hi)));
}

// 4 grid entries of 8 bytes (groups 0..3 of a sub-block) as one vector.
static inline __m256i grid4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
  return _mm256_set_epi64x(static_cast<int64_t>(g3), static_cast<int64_t>(g2), static_cast<int64_t>(g1),
                           static_cast<int64_t>(g0));
}

// The sign factors (+-1 bytes) of 4 groups from their 8-bit sign masks.
static inline __m256i signs4(uint8_t s0, uint8_t s1, uint8_t s2, uint8_t s3) {
  return grid4(iq::kSignFactors.v[s0], iq::kSignFactors.v[s1], iq::kSignFactors.v[s2], iq::kSignFactors.v[s3]);
}

}  // namespace ns::kernels::iq_avx2
