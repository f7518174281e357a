// The K-quant family's SIMD kernels (Q2_K..Q6_K weights x Q8_K activations):
// one micro-tile loop, one block decoder per format, and the integer engine
// of an instruction set (AVX2 here, AVX-512 + VNNI in kquant_avx512.cpp).
//
// All five follow ggml's x86 kernels' arithmetic (their lanes and float
// order, so results match them bit for bit). Per super-block and 32-element
// sub-block v, a format decodes its levels to unsigned bytes q (minus a
// constant kOffset for Q3_K and Q6_K) and its sub-block scales to int16 lanes
// sc: lanes 0..7 for elements 0..15, 8..15 for 16..31 (one value in all 16
// for the formats with 32-element sub-blocks). maddubs multiplies q with the
// activations (signed) into int16 pair sums, the offset comes off as
// kOffset * (pair sums of x), computed once per activation vector and shared
// by the R rows, and madd against sc widens to int32. The super-block's sum
// stays exact in 8 int32 lanes; the format's epilogue applies d_x d_w with
// one float FMA and its mins (Q2_K, Q4_K, Q5_K) as ggml does, each in its own
// way (below), and its finish sums the lanes.
//
// The integer engine E decides how a super-block's 8 int32 lanes are formed:
// AVX2 takes one sub-block per step (maddubs, madd, add); AVX-512 two per
// step in a 512-bit register (maddubs, vpdpwssd) and adds the halves at the
// end. Both leave the same exact integers in the same lanes, so the float
// side, which this loop owns, gives the same bits on either path.
//
// Each super-block prefetches the lines the next micro-tile reads, R rows
// further down (see avx2_util.h). Only *_avx2.cpp and *_avx512.cpp files
// include this; everything is in an anonymous namespace, so no copy compiled
// for one instruction set can stand in for another's (see avx2_util.h).
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::kq_simd {
namespace {

using XL = kq::Q8K;

// A format with nothing to carry per token or per row x token.
struct None {};

// Bit `bit` of every byte moved to bit `to` (16-bit shifts: bits crossing
// into the neighbour byte land outside the mask).
inline __m256i move_bit(__m256i bytes, int bit, int to) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << to));
  return _mm256_and_si256(bit <= to ? _mm256_slli_epi16(bytes, to - bit) : _mm256_srli_epi16(bytes, bit - to), mask);
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 int16 scales as sub-blocks 8h..8h+7 in both 128-bit lanes of s[h].
inline void split_halves(__m256i all, __m256i (&s)[2]) {
  s[0] = _mm256_permute2x128_si256(all, all, 0x00);
  s[1] = _mm256_permute2x128_si256(all, all, 0x11);
}

// acc + d_x d_w * (float) sum, d_w the fp16 at d: a super-block's main FMA.
inline __m256 add_scaled(__m256 acc, float dx, const uint8_t* d, __m256i sum) {
  return _mm256_fmadd_ps(_mm256_set1_ps(dx * load_fp16(d)), _mm256_cvtepi32_ps(sum), acc);
}

// A format decoder D supplies:
//   L                       its block layout (kquant.h)
//   kOffset                 the constant its bytes q exceed the levels by
//   Row, prepare(wr)        a row's per-super-block state (unpacked scales)
//   decode(row, wr, v, &q, &sc)  sub-block v, as described above
//   Tok, token(xt)          a token's per-super-block state (activation sums)
//   Mins                    a row x token accumulator apart from the main one
//   epilogue(&acc, &mins, row, wr, dx, tok, sum)  one super-block's floats
//   finish(acc, mins)       the dot product

// Q2_K: 2-bit levels, 4-bit scale and min per 16 elements. Both float FMAs go
// into the one accumulator per super-block: -d_x dmin_w * mins first, then
// d_x d_w * sum.
struct Q2K {
  using L = kq::Q2K;
  static constexpr int kOffset = 0;
  struct Row {
    __m256i scales[2], mins;  // int16
  };
  using Tok = __m256i;  // the 16 bsums
  using Mins = None;
  [[gnu::always_inline]] static Row prepare(const uint8_t* wr) {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + L::scales));
    Row row;
    split_halves(_mm256_cvtepu8_epi16(_mm_and_si128(packed, low4)), row.scales);
    row.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    return row;
  }
  // Elements 32 v..32 v + 31: bits 2k of qs[32 h ...], h = v / 4, k = v % 4.
  [[gnu::always_inline]] static void decode(const Row& row, const uint8_t* wr, int v, __m256i* q, __m256i* sc) {
    const int h = v / 4, k = v % 4;
    *q = _mm256_and_si256(_mm256_srli_epi16(load256(wr + L::qs + 32 * h), 2 * k), _mm256_set1_epi8(3));
    *sc = _mm256_shuffle_epi8(row.scales[h], avx2::pick_pair(k));
  }
  static Tok token(const uint8_t* xt) { return load256(xt + XL::bsums); }
  static void epilogue(__m256* acc, None*, const Row& row, const uint8_t* wr, float dx, Tok bsums, __m256i sum) {
    const __m256 m = _mm256_cvtepi32_ps(_mm256_madd_epi16(row.mins, bsums));
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(-dx * load_fp16(wr + L::dmin)), m, *acc);
    *acc = add_scaled(*acc, dx, wr + L::d, sum);
  }
  static float finish(__m256 acc, None) { return avx2::hsum(acc); }
};

// Q3_K and Q6_K: signed levels held as q + kOffset, int scales per 16
// elements, no mins: one float FMA of d_x d_w per super-block.
template <class D>
struct SignedLevels {
  struct Row {
    __m256i scales[2];  // int16, see split_halves
  };
  using Tok = None;
  using Mins = None;
  static Tok token(const uint8_t*) { return {}; }
  static void epilogue(__m256* acc, None*, const Row&, const uint8_t* wr, float dx, Tok, __m256i sum) {
    *acc = add_scaled(*acc, dx, wr + D::L::d, sum);
  }
  static float finish(__m256 acc, None) { return avx2::hsum(acc); }
};

// Q3_K: the level q - 4 is taken as u = (low 2 bits) | (third bit << 2) in
// [0, 7]; 16 signed 6-bit scales.
struct Q3K : SignedLevels<Q3K> {
  using L = kq::Q3K;
  static constexpr int kOffset = 4;
  // The 16 scales minus 32 as int16 (same bits as kq::unpack_q3k_scales, four
  // bytes at a time).
  [[gnu::always_inline]] static Row prepare(const uint8_t* wr) {
    uint32_t a[3];
    std::memcpy(a, wr + L::scales, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const __m128i sc = _mm_set_epi32(static_cast<int>(((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4)),
                                     static_cast<int>(((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4)),
                                     static_cast<int>((a[1] & m4) | (((a[2] >> 2) & m2) << 4)),
                                     static_cast<int>((a[0] & m4) | ((a[2] & m2) << 4)));
    Row row;
    split_halves(_mm256_cvtepi8_epi16(_mm_sub_epi8(sc, _mm_set1_epi8(32))), row.scales);
    return row;
  }
  // Elements 32 v..: bits 2k of qs[32 h ...], bit v of hmask; h = v / 4, k = v % 4.
  [[gnu::always_inline]] static void decode(const Row& row, const uint8_t* wr, int v, __m256i* q, __m256i* sc) {
    const int h = v / 4, k = v % 4;
    const __m256i low = _mm256_and_si256(_mm256_srli_epi16(load256(wr + L::qs + 32 * h), 2 * k), _mm256_set1_epi8(3));
    *q = _mm256_or_si256(low, move_bit(load256(wr + L::hmask), v, 2));
    *sc = _mm256_shuffle_epi8(row.scales[h], avx2::pick_pair(k));
  }
};

// Q6_K: the 6-bit level q (ql nibble | 2 qh bits << 4, in [0, 63]) is the
// weight + 32; int8 scales per 16 elements.
struct Q6K : SignedLevels<Q6K> {
  using L = kq::Q6K;
  static constexpr int kOffset = 32;
  [[gnu::always_inline]] static Row prepare(const uint8_t* wr) {
    Row row;
    split_halves(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + L::scales))), row.scales);
    return row;
  }
  // Elements 32 v..: h = v / 4, k = v % 4 (see kquant.h); bits 2k, 2k + 1 of
  // every qh byte to bits 4, 5.
  [[gnu::always_inline]] static void decode(const Row& row, const uint8_t* wr, int v, __m256i* q, __m256i* sc) {
    const int h = v / 4, k = v % 4;
    const __m256i ql = load256(wr + L::ql + 64 * h + 32 * (k % 2));
    const __m256i qh = load256(wr + L::qh + 32 * h);
    const __m256i low = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
    const __m256i high = _mm256_and_si256(k <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2 * k - 4),
                                          _mm256_set1_epi8(0x30));
    *q = _mm256_or_si256(low, high);
    *sc = _mm256_shuffle_epi8(row.scales[h], avx2::pick_pair(k));
  }
};

// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; the mins meet
// the activations' run sums in one madd per super-block.
struct K4Row {
  __m256i scales;  // int16, both 128-bit lanes
  __m128i mins;    // int16
};

// Sub-block v of Q4_K's layout: nibble half v % 2 of qs[32 (v / 2) ...].
inline __m256i k4_nibbles(const uint8_t* qs, int v) {
  const __m256i bits = load256(qs + 32 * (v / 2));
  return _mm256_and_si256(v % 2 == 0 ? bits : _mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0f));
}

template <class D>
struct K4Common {
  using Row = K4Row;
  using Tok = __m128i;  // the 8 run sums
  static constexpr int kOffset = 0;
  [[gnu::always_inline]] static Row prepare(const uint8_t* wr) {
    Row row;
    avx2::unpack_k4_scales(wr + D::L::scales, &row.scales, &row.mins);
    return row;
  }
  static Tok token(const uint8_t* xt) { return avx2::q8k_sums32(xt + XL::bsums); }
  // Sub-block v: its levels (D::levels) and its scale.
  [[gnu::always_inline]] static void decode(const Row& row, const uint8_t* wr, int v, __m256i* q, __m256i* sc) {
    *q = D::levels(wr, v);
    *sc = _mm256_shuffle_epi8(row.scales, avx2::pick_one(v));
  }
};

// Q4_K: the mins go into a 4-lane float accumulator with -d_x dmin_w; the
// two accumulators are summed at the end.
struct Q4K : K4Common<Q4K> {
  using L = kq::Q4K;
  using Mins = __m128;
  [[gnu::always_inline]] static __m256i levels(const uint8_t* wr, int v) { return k4_nibbles(wr + L::qs, v); }
  static void epilogue(__m256* acc, __m128* acc_m, const Row& row, const uint8_t* wr, float dx, Tok sums32,
                       __m256i sum) {
    const __m128 m = _mm_cvtepi32_ps(_mm_madd_epi16(row.mins, sums32));
    *acc_m = _mm_fmadd_ps(_mm_set1_ps(-dx * load_fp16(wr + L::dmin)), m, *acc_m);
    *acc = add_scaled(*acc, dx, wr + L::d, sum);
  }
  static float finish(__m256 acc, __m128 acc_m) {
    __m128 m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return avx2::hsum(acc) + _mm_cvtss_f32(m);
  }
};

// Q5_K: Q4_K with the fifth bit of each element (bit v of qh) or'ed into its
// nibble; the mins' dot with the run sums is one integer, times -d_x dmin_w
// into a float summed apart and added at the end.
struct Q5K : K4Common<Q5K> {
  using L = kq::Q5K;
  using Mins = float;
  [[gnu::always_inline]] static __m256i levels(const uint8_t* wr, int v) {
    return _mm256_or_si256(k4_nibbles(wr + L::qs, v), move_bit(load256(wr + L::qh), v, 4));
  }
  static void epilogue(__m256* acc, float* acc_m, const Row& row, const uint8_t* wr, float dx, Tok sums32,
                       __m256i sum) {
    __m128i m = _mm_madd_epi16(row.mins, sums32);
    m = _mm_add_epi32(m, _mm_unpackhi_epi64(m, m));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 1));
    const __m128 dmin = _mm_set_ss(-dx * load_fp16(wr + L::dmin));
    *acc_m = _mm_cvtss_f32(_mm_fmadd_ss(dmin, _mm_cvtepi32_ps(m), _mm_set_ss(*acc_m)));
    *acc = add_scaled(*acc, dx, wr + L::d, sum);
  }
  static float finish(__m256 acc, float acc_m) { return avx2::hsum(acc) + acc_m; }
};

// The AVX2 engine: one sub-block per step. Pairs of q * x (and of kOffset *
// x) stay within int16 (2 * 63 * 127 at most, Q6_K); times the scale
// (|sc| <= 128) in int32.
struct Avx2 {
  static constexpr int kSteps = 8;
  using Vec = __m256i;
  template <class D>
  static void decode(const typename D::Row& row, const uint8_t* wr, int s, Vec* q, Vec* sc) {
    D::decode(row, wr, s, q, sc);
  }
  static Vec load_x(const uint8_t* qs, int s) { return load256(qs + 32 * s); }
  template <class D>
  static Vec offset(Vec x) {
    return D::kOffset == 0 ? x : _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(D::kOffset)), x);
  }
  template <class D>
  static Vec dot(Vec sum, Vec q, Vec sc, Vec x, Vec off) {
    __m256i p16 = _mm256_maddubs_epi16(q, x);
    if constexpr (D::kOffset != 0) p16 = _mm256_sub_epi16(p16, off);
    return _mm256_add_epi32(sum, _mm256_madd_epi16(sc, p16));
  }
  static __m256i lanes(Vec sum) { return sum; }
};

template <class D, class E, int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    using V = typename E::Vec;
    const int64_t nb = n / kq::kElems;
    __m256 acc[R][T];
    typename D::Mins acc_m[R][T];
    avx2::zero_tile(acc);
    avx2::zero_tile(acc_m);

    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = w + b * D::L::bytes;
      const uint8_t* xb = x + b * XL::bytes;
      avx2::prefetch_next_blocks<R>(wb, ws, D::L::bytes);
      typename D::Row row[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) row[r] = D::prepare(wb + r * ws);
      V sum[R][T];
      avx2::zero_tile(sum);

#pragma GCC unroll 8
      for (int s = 0; s < E::kSteps; ++s) {
        V q[R], sc[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) E::template decode<D>(row[r], wb + r * ws, s, &q[r], &sc[r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const V xq = E::load_x(xb + t * xs + XL::qs, s);
          const V off = E::template offset<D>(xq);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) sum[r][t] = E::template dot<D>(sum[r][t], q[r], sc[r], xq, off);
        }
      }

#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* xt = xb + t * xs;
        const float dx = kq::load_f32(xt + XL::d);
        const typename D::Tok tok = D::token(xt);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          D::epilogue(&acc[r][t], &acc_m[r][t], row[r], wb + r * ws, dx, tok, E::lanes(sum[r][t]));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t * ys + r] = D::finish(acc[r][t], acc_m[r][t]);
  }
};

// The vec_dot and tile entry points of format D on engine E (shapes: see
// avx2::MicroKernels).
template <class D, class E>
struct Bind {
  template <int R, int T>
  using M = Micro<D, E, R, T>;
};
template <class D, class E, int kRowsSingle, int kRowsBatch, int kTokens>
using Kernels = avx2::MicroKernels<Bind<D, E>::template M, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace
}  // namespace ns::kernels::kq_simd

// The vec_dot and tile of every K-quant on one ISA (formats.h's q2_k_<isa> ..
// q6_k_<isa>), with K<D> that ISA's kq_simd::Kernels for decoder D
// (kquant_avx2.cpp, kquant_avx512.cpp).
#define NS_KQUANT_SIMD_ENTRY_POINTS(isa)                                                                           \
  float q2_k_##isa::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q2K>::vec_dot(w, x, n); } \
  void q2_k_##isa::tile(const Tile& t) { K<kq_simd::Q2K>::tile(t); }                                               \
  float q3_k_##isa::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q3K>::vec_dot(w, x, n); } \
  void q3_k_##isa::tile(const Tile& t) { K<kq_simd::Q3K>::tile(t); }                                               \
  float q4_k_##isa::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q4K>::vec_dot(w, x, n); } \
  void q4_k_##isa::tile(const Tile& t) { K<kq_simd::Q4K>::tile(t); }                                               \
  float q5_k_##isa::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q5K>::vec_dot(w, x, n); } \
  void q5_k_##isa::tile(const Tile& t) { K<kq_simd::Q5K>::tile(t); }                                               \
  float q6_k_##isa::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q6K>::vec_dot(w, x, n); } \
  void q6_k_##isa::tile(const Tile& t) { K<kq_simd::Q6K>::tile(t); }
