// The tile loop of the Q4_0_R16 kernels (q4_0_r16.h), shared by the AVX2 and
// AVX-512 files, which include it with their own flags (everything here is
// static or a template over the including file's micro-kernel, as in
// avx2_util.h).
//
// The float order is the file-layout Q4_0 kernel's of the same path, so an
// expert gives the same bits repacked or not (a streamed run equals a mapped
// one). Read from block32_avx2.h (AVX2) and int8_avx512.h (AVX-512, Q4_0 is
// not kEvenOdd: one_block in 256-bit registers), which agree bit for bit, for
// every row x token alike whatever the micro-tile (4 x 4, 3 x 4, 4 x 1) or
// vec_dot:
//   per block b, lane j = 0..7 holds the exact int32 sum over elements
//     4 j .. 4 j + 3 of (nibble - 8) * q_x (lanes 0-3 the low nibbles, 4-7 the
//     high ones: unpack_nibbles' element order);
//   acc_j = fma(float(lane j), d_w * d_x, acc_j), one accumulator per lane
//     from 0, blocks in order, d_w * d_x one rounded float product;
//   y = avx2::hsum(acc): ((acc_0 + acc_4) + (acc_2 + acc_6)) +
//     ((acc_1 + acc_5) + (acc_3 + acc_7)).
// The layout serves exactly that: slice c's low nibbles against the
// activation's int32 at 4 c are lane c of all 16 rows, its high nibbles
// against 16 + 4 c lane 4 + c. So a micro-kernel keeps 8 accumulators per
// token (one per lane, each a vector over rows), starts each lane's integer
// sum from -8 x the sum of its four q_x (the codes are w + 8), and ends with
// lanes_total below. It costs 8 converts and FMAs per block and token for 16
// rows (the file layout: one of each per row, on 8 lanes), and 8 accumulators
// per token, which is what bounds a micro-tile's tokens.
//
// A micro-kernel M runs one group of 16 rows for T <= M::kTokens tokens over
// all nb blocks: M::template run<T>(group, x, x_stride, starts, nb, y,
// y_stride), where starts[(t * nb + b) * 8 + j] is lane j's start for token t
// and block b (lane_starts). Tokens in groups of M::kTokens are the outer
// loop: their starts are made once (a thread's scratch, kept: no allocation
// once warm) for all the tile's groups of rows, which the tile (a chunk of
// matmul, in L2) streams once per token group. Rows after the last whole
// group are in Q4_0's layout and go to the plain Q4_0 tile of the same ISA.
#pragma once

#include <immintrin.h>

#include <cstring>
#include <utility>
#include <vector>

#include "engine/kernels/q4_0_r16.h"

namespace ns::kernels::q4_0_r16 {

// avx2::hsum's pairing of the 8 lanes' accumulators, each a vector over rows.
template <class V, class Add>
static inline V lanes_total(const V (&a)[8], Add add) {
  return add(add(add(a[0], a[4]), add(a[2], a[6])), add(add(a[1], a[5]), add(a[3], a[7])));
}

// The activation block's int32 i (bytes 2 + 4 i .. 5 + 4 i: q_x 4 i .. 4 i + 3).
static inline int32_t x_int32(const uint8_t* xb, int i) {
  int32_t v;
  std::memcpy(&v, xb + 2 + 4 * i, sizeof v);
  return v;
}

// Lane j's start for the activation block at xb: -8 x the sum of q_x 4 j ..
// 4 j + 3 (the codes are w + 8), exact in int32.
static inline void lane_starts(const uint8_t* xb, int32_t* out) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
  const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xq), _mm256_set1_epi16(1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_sub_epi32(_mm256_setzero_si256(), s));
}

template <class M, int... I>
static void run_token_group(int tn, const uint8_t* g, const uint8_t* x, size_t xs, const int32_t* starts, int64_t nb,
                            float* y, int64_t ys, std::integer_sequence<int, I...>) {
  ((tn == I + 1 ? M::template run<I + 1>(g, x, xs, starts, nb, y, ys) : void()), ...);
}

template <class M>
static void tile_loop(const Tile& t, TileFn plain_tile) {
  constexpr int TM = M::kTokens;
  const int64_t nb = t.n / q4_0::kBlockElems;
  thread_local std::vector<int32_t> scratch;
  if (scratch.size() < static_cast<size_t>(TM * nb * 8)) scratch.resize(static_cast<size_t>(TM * nb * 8));
  int32_t* starts = scratch.data();
  for (int64_t t0 = 0; t0 < t.n_tokens; t0 += TM) {
    const int tn = static_cast<int>(t.n_tokens - t0 < TM ? t.n_tokens - t0 : TM);
    const uint8_t* x = t.x + t0 * t.x_stride;
    for (int k = 0; k < tn; ++k)
      for (int64_t b = 0; b < nb; ++b)
        lane_starts(x + k * t.x_stride + b * q8_0::kBlockBytes, starts + (k * nb + b) * 8);
    for (int64_t g = 0; g < t.n_rows / kRows; ++g)
      run_token_group<M>(tn, t.w + g * kRows * t.w_stride, x, t.x_stride, starts, nb, t.y + t0 * t.y_stride + g * kRows,
                         t.y_stride, std::make_integer_sequence<int, TM>{});
  }
  const int64_t full = t.n_rows / kRows * kRows;
  if (full < t.n_rows)
    plain_tile(Tile{t.w + full * t.w_stride, t.w_stride, t.n_rows - full, t.x, t.x_stride, t.n_tokens, t.n, t.y + full,
                    t.y_stride});
}

}  // namespace ns::kernels::q4_0_r16
