// The AVX2 kernel of the formats whose 32-element blocks are one scale and 16
// bytes of nibbles indexing a 16-entry int8 table (IQ4_NL, MXFP4), weights x
// Q8_0 activations, in ggml's arithmetic (its x86 kernels' float order, the
// same for both formats). Per block: the nibbles unpack to bytes in element
// order and a byte shuffle looks them up in the table, giving int8 weights;
// maddubs on |w| and x carrying w's sign gives the exact products, madd sums
// them to int32, then one float FMA with d_x * d_w into one of two
// accumulators, even blocks and odd blocks; an odd last block is added to
// their sum as a float.
// Each block prefetches the bytes the next micro-tile reads, R rows further
// down (see avx2_util.h).
//
// A format supplies F with kBlockElems, kBlockBytes, kQsOffset (where the nibbles start),
// kValues (the table) and scale(block) (the weight block's scale as a float).
// Like quant_avx2.h, only *_avx2.cpp files include this; each instantiates it
// with an F of its own anonymous namespace, so no copy is shared with another
// file.
#pragma once

#include "engine/kernels/formats.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::avx2 {

template <class F, int R, int T>
struct Table4Micro {
  static_assert(F::kBlockElems == q8_0::kBlockElems, "one weight block per Q8_0 block");
  static constexpr size_t kWBytes = F::kBlockBytes;
  static constexpr size_t kXBytes = q8_0::kBlockBytes;

  // The products of block b for R rows and T tokens: exact int32 lanes.
  static inline void block_products(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b,
                                    __m256i (&p)[R][T]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(F::kValues)));
    const uint8_t* wb = w + b * kWBytes;
    // |w| is kept per row when several tokens reuse it; for a lone token it is
    // taken where it is used, which keeps the live registers within 16.
    __m256i q[R], qabs[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      prefetch_next_rows(wb + r * ws, R, ws);
      q[r] = _mm256_shuffle_epi8(table, unpack_nibbles(wb + r * ws + F::kQsOffset));
      if constexpr (T > 1) qabs[r] = _mm256_abs_epi8(q[r]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + t * xs + b * kXBytes + 2));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // |w| * (x with w's sign) = w * x; pairs sum to at most 2 * 127 * 127 in int16.
        const __m256i wabs = T > 1 ? qabs[r] : _mm256_abs_epi8(q[r]);
        p[r][t] = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, q[r])), ones);
      }
    }
  }

  // d_x * d_w of block b, row r, token t.
  static inline float block_scale(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b, int r, int t) {
    return load_fp16(x + t * xs + b * kXBytes) * F::scale(w + r * ws + b * kWBytes);
  }

  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    const int64_t nb = n / F::kBlockElems;
    __m256 even[R][T], odd[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) even[r][t] = odd[r][t] = _mm256_setzero_ps();

    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
      __m256i p[R][T];
      block_products(w, ws, x, xs, b, p);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          even[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(w, ws, x, xs, b, r, t)),
                                       _mm256_cvtepi32_ps(p[r][t]), even[r][t]);
      block_products(w, ws, x, xs, b + 1, p);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          odd[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(w, ws, x, xs, b + 1, r, t)),
                                      _mm256_cvtepi32_ps(p[r][t]), odd[r][t]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(_mm256_add_ps(even[r][t], odd[r][t]));
    if (b < nb) {  // the odd last block: its exact sum, then d * sum added to the total
      __m256i p[R][T];
      block_products(w, ws, x, xs, b, p);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p[r][t]), _mm256_extracti128_si256(p[r][t], 1));
          s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
          s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
          const __m128 total = _mm_fmadd_ss(_mm_set_ss(block_scale(w, ws, x, xs, b, r, t)), _mm_cvtepi32_ps(s),
                                            _mm_set_ss(y[t * ys + r]));
          y[t * ys + r] = _mm_cvtss_f32(total);
        }
      }
    }
  }
};

// Shapes: 4 rows for a lone token, 2 x 4 otherwise (|w| of 3 rows would not
// stay in registers); for IQ4_NL 3 x 4 measured the same within noise on one
// core of a shared Sapphire Rapids VM, 4096-wide rows.
inline constexpr int kTable4RowsSingle = 4, kTable4RowsBatch = 2, kTable4Tokens = 4;

// The vec_dot and tile entry points of format F.
template <class F>
struct Table4Bind {
  template <int R, int T>
  using Micro = Table4Micro<F, R, T>;
};
template <class F>
using Table4Kernels = MicroKernels<Table4Bind<F>::template Micro, kTable4RowsSingle, kTable4RowsBatch, kTable4Tokens>;

}  // namespace ns::kernels::avx2
