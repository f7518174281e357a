// The AVX2 tile loop of the formats whose 32-element weight blocks are dotted
// against one 32-element activation block each, one scale per block and
// perhaps a min: Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 (x Q8_0) and Q4_1, Q5_1
// (x Q8_1), in ggml's x86 arithmetic. A format supplies a block decoder; the
// loop, the integer products and the float order are here.
//
// Per block, row and token the products are exact int32 lanes (8 lanes, each
// the sum of four products), made one of two ways:
// - signed weights (Q8_0, and the table formats, whose nibbles a byte shuffle
//   looks up in a 16-entry int8 table): maddubs on |w| and x carrying w's
//   sign, then madd with ones;
// - unsigned codes u = w + o (Q4_0: o = 8, Q5_0: o = 16, Q4_1 / Q5_1: o = 0,
//   their level is the code itself): maddubs(u, x) minus o * (pairwise sums
//   of x), the latter computed once per activation block and shared by the R
//   rows, then madd with ones.
// The int32 lanes go to float and one FMA with d_w * d_x adds them to the
// accumulator: one accumulator over the blocks in order, or (kEvenOdd, the
// table formats: ggml's IQ4_NL / MXFP4 kernel) two, even blocks and odd
// blocks, with an odd last block's exact sum times its scale added to their
// total as a float. Formats with a min (kMin, Q8_1 activations) add
// m_w * s_x per block in a separate sum, lane r for row r, added at the end
// (ggml's order).
//
// A format is a block decoder F (the ones below, in namespace block32) with
//   kBlockBytes              weight block bytes
//   kSigned                  decode gives int8 weights (else codes w + kOffset)
//   kOffset                  o above (unsigned codes only)
//   kMin                     the block holds an fp16 min at byte 2; x is Q8_1
//   kEvenOdd                 the two-accumulator order above
//   scale(block)             d_w as a float
//   decode(block)            the 32 weight bytes in element order
//   decode_u(block)          signed formats: w + 128 as unsigned bytes, for
//                            the AVX-512 kernel (int8_avx512.h), which reads
//                            these decoders too
// Each block prefetches the bytes the next micro-tile reads, R rows further
// down (see avx2_util.h). Like quant_avx2.h, only *_avx2.cpp and *_avx512.cpp
// files include this; the decoders are in an anonymous namespace, so each
// file instantiates the loop with types of its own and no copy is shared with
// another file (or ISA).
#pragma once

#include "engine/kernels/formats.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::avx2 {

// An odd last block (kEvenOdd): out += d * (the exact sum of p's int32
// lanes), one float FMA; d holds d_w * d_x in every lane.
static inline void add_block_total(float& out, __m256i p, __m256 d) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  out = _mm_cvtss_f32(_mm_fmadd_ss(_mm256_castps256_ps128(d), _mm_cvtepi32_ps(s), _mm_set_ss(out)));
}

template <class F, int R, int T>
struct Block32Micro {
  static_assert(F::kMin ? q8_1::kBlockElems == 32 : q8_0::kBlockElems == 32, "one weight block per activation block");
  static_assert(!(F::kMin && F::kEvenOdd) && !(F::kSigned && F::kOffset != 0), "no format needs these");
  static constexpr size_t kXBytes = F::kMin ? q8_1::kBlockBytes : q8_0::kBlockBytes;
  static constexpr size_t kXQs = F::kMin ? 4 : 2;  // where the activation's int8 values start

  // Block b for R rows and T tokens: each row x token's exact int32 lanes p
  // and d = d_w * d_x go to f(r, t, p, d) as they are made.
  template <class Fn>
  static inline void block(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b, Fn&& f) {
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t* wb = w + b * F::kBlockBytes;
    // |w| and d_w are kept per row when several tokens reuse them; for a lone
    // token they are taken where they are used, which keeps the live
    // registers within 16.
    __m256i q[R], qabs[R];
    __m256 dw[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      prefetch_next_rows(wb + r * ws, R, ws);
      q[r] = F::decode(wb + r * ws);
      if constexpr (F::kSigned && T > 1) qabs[r] = _mm256_abs_epi8(q[r]);  // -128: 128, right as an unsigned byte
      if constexpr (T > 1) dw[r] = _mm256_set1_ps(F::scale(wb + r * ws));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXQs));
      const __m256 dx = broadcast_fp16(xb);
      // Pairwise sums stay within int16: |q x| pairs <= 2 * 128 * 127 (Q8_0),
      // 2 * 31 * 127 (5-bit codes); |o x| pairs <= 2 * 16 * 128.
      __m256i offset = _mm256_setzero_si256();
      if constexpr (F::kOffset != 0) offset = _mm256_maddubs_epi16(_mm256_set1_epi8(F::kOffset), xq);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i p16;
        if constexpr (F::kSigned) {
          const __m256i wabs = T > 1 ? qabs[r] : _mm256_abs_epi8(q[r]);
          p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, q[r]));
        } else {
          p16 = _mm256_maddubs_epi16(q[r], xq);
          if constexpr (F::kOffset != 0) p16 = _mm256_sub_epi16(p16, offset);
        }
        const __m256 d = _mm256_mul_ps(T > 1 ? dw[r] : _mm256_set1_ps(F::scale(wb + r * ws)), dx);
        f(r, t, _mm256_madd_epi16(p16, ones), d);
      }
    }
  }

  // acc += float(p) * d for the R x T products of block b.
  static inline void accumulate(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b,
                                __m256 (&acc)[R][T]) {
    block(w, ws, x, xs, b, [&acc](int r, int t, __m256i p, __m256 d) {
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc[r][t]);
    });
  }

  // The mins' share of block b: lane r of mins[t] += m_w(row r) * s_x(token t).
  static inline void add_mins(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t b, __m128 (&mins)[T]) {
    const uint8_t* wb = w + b * F::kBlockBytes;
    const auto min_of = [&](int r) { return r < R ? load_fp16(wb + r * ws + 2) : 0.0f; };
    const __m128 m = _mm_setr_ps(min_of(0), min_of(1), min_of(2), min_of(3));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      mins[t] = _mm_fmadd_ps(m, _mm_broadcast_ss(&fp16_table.value[load_u16(x + t * xs + b * kXBytes + 2)]), mins[t]);
  }

  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    const int64_t nb = n / 32;
    __m256 acc[R][T];
    zero_tile(acc);
    if constexpr (!F::kEvenOdd) {
      __m128 mins[T];  // lane r: the sum of m_w * s_x of row r
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) mins[t] = _mm_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        accumulate(w, ws, x, xs, b, acc);
        if constexpr (F::kMin) add_mins(w, ws, x, xs, b, mins);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          y[t * ys + r] = hsum(acc[r][t]);
          if constexpr (F::kMin) {
            float lanes[4];
            _mm_storeu_ps(lanes, mins[t]);
            y[t * ys + r] += lanes[r];
          }
        }
    } else {
      __m256 odd[R][T];  // acc holds the even blocks
      zero_tile(odd);
      int64_t b = 0;
      for (; b + 1 < nb; b += 2) {
        accumulate(w, ws, x, xs, b, acc);
        accumulate(w, ws, x, xs, b + 1, odd);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(_mm256_add_ps(acc[r][t], odd[r][t]));
      if (b < nb) {  // the odd last block: its exact sum, then d * sum added to the total
        block(w, ws, x, xs, b, [y, ys](int r, int t, __m256i p, __m256 d) { add_block_total(y[t * ys + r], p, d); });
      }
    }
  }
};

// The vec_dot and tile entry points of format F: micro-tiles of up to kTokens
// tokens and kRowsBatch rows, kRowsSingle rows for a lone token (each
// format's measured shapes are in its file).
template <class F, int kRowsSingle, int kRowsBatch, int kTokens>
using Block32Kernels = KernelsOf<Block32Micro, F, kRowsSingle, kRowsBatch, kTokens>;

// The block decoders, one per format (layouts: formats.h).
namespace block32 {
namespace {

// The fields every decoder of an fp16-scaled format without a min has.
struct Fp16Scaled {
  static constexpr bool kMin = false;
  static float scale(const uint8_t* block) { return load_fp16(block); }
};

struct Q8_0 : Fp16Scaled {
  static constexpr size_t kBlockBytes = q8_0::kBlockBytes;
  static constexpr bool kSigned = true, kEvenOdd = false;
  static constexpr int kOffset = 0;
  static __m256i decode(const uint8_t* block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  }
  static __m256i decode_u(const uint8_t* block) {  // the sign bit flipped: w + 128
    return _mm256_xor_si256(decode(block), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

struct Q4_0 : Fp16Scaled {  // the nibbles as stored are w + 8
  static constexpr size_t kBlockBytes = q4_0::kBlockBytes;
  static constexpr bool kSigned = false, kEvenOdd = false;
  static constexpr int kOffset = 8;
  static __m256i decode(const uint8_t* block) { return unpack_nibbles(block + 2); }
};

struct Q5_0 : Fp16Scaled {  // nibbles and fifth bits: w + 16
  static constexpr size_t kBlockBytes = q5_0::kBlockBytes;
  static constexpr bool kSigned = false, kEvenOdd = false;
  static constexpr int kOffset = 16;
  static __m256i decode(const uint8_t* block) { return unpack_5bit(block + 2, block + 6); }
};

// Q4_1 and Q5_1: the codes are the levels; the min is at byte 2.
struct Q4_1 {
  static constexpr size_t kBlockBytes = q4_1::kBlockBytes;
  static constexpr bool kSigned = false, kMin = true, kEvenOdd = false;
  static constexpr int kOffset = 0;
  static float scale(const uint8_t* block) { return load_fp16(block); }
  static __m256i decode(const uint8_t* block) { return unpack_nibbles(block + 4); }
};

struct Q5_1 : Q4_1 {
  static constexpr size_t kBlockBytes = q5_1::kBlockBytes;
  static __m256i decode(const uint8_t* block) { return unpack_5bit(block + 4, block + 8); }
};

// The table formats: 16 nibbles bytes at kQs index a 16-entry int8 table.
template <const int8_t* kValues, size_t kQs>
struct Table4 {
  static constexpr bool kSigned = true, kMin = false, kEvenOdd = true;
  static constexpr int kOffset = 0;
  static __m256i decode(const uint8_t* block) { return lookup_nibbles(kValues, block + kQs); }
  static __m256i decode_u(const uint8_t* block) {  // a table of level + 128
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValues));
    const __m256i table = _mm256_broadcastsi128_si256(_mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80))));
    return _mm256_shuffle_epi8(table, unpack_nibbles(block + kQs));
  }
};

struct IQ4_NL : Table4<iq4_nl::kValues, 2> {
  static constexpr size_t kBlockBytes = iq4_nl::kBlockBytes;
  static float scale(const uint8_t* block) { return load_fp16(block); }
};

struct MXFP4 : Table4<mxfp4::kValues, 1> {  // E8M0 scale, halved (formats.h)
  static constexpr size_t kBlockBytes = mxfp4::kBlockBytes;
  static float scale(const uint8_t* block) { return mxfp4::scale(block[0]); }
};

}  // namespace
}  // namespace block32

}  // namespace ns::kernels::avx2
