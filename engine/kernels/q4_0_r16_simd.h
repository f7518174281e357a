// The tile loop of the Q4_0_R16 kernels (q4_0_r16.h), shared by the AVX2 and
// AVX-512 files, which include it with their own flags (everything here is
// static or a template over the including file's micro-kernel, as in
// avx2_util.h).
//
// A micro-kernel M runs one group of 16 rows for T tokens over blocks
// [b0, b1): M::template run<T>(group, x, x_stride, b0, b1, off, y, y_stride,
// first), its float sums starting from 0 (first) or from y, and stored back
// to y, so a row's sum is one float sum over the blocks in order however the
// blocks are split. off[t * kSlab + b - b0] is 8 * sum(q_x) of token t's block
// b: the nibbles are codes w + 8, and sum((w + 8) q_x) - 8 sum(q_x) is the
// exact sum of w q_x (|sum| <= 32 * 15 * 127 stays far inside int32).
// Tokens in groups of M::kTokens are the outer loop, so the tile's rows (a
// chunk of matmul, in L2) are streamed once per token group; blocks go in
// slabs of kSlab so the offsets fit on the stack. Rows after the last whole
// group are in Q4_0's layout and go to the plain Q4_0 tile of the same ISA.
#pragma once

#include <cstring>
#include <utility>

#include "engine/kernels/q4_0_r16.h"

namespace ns::kernels::q4_0_r16 {

inline constexpr int64_t kSlab = 256;  // blocks per pass (8192 columns)

template <class M, int T>
static void run_tokens(const Tile& t, int64_t t0, const int32_t* off, int64_t b0, int64_t b1) {
  for (int64_t g = 0; g < t.n_rows / kRows; ++g)
    M::template run<T>(t.w + g * kRows * t.w_stride, t.x + t0 * t.x_stride, t.x_stride, b0, b1, off,
                       t.y + t0 * t.y_stride + g * kRows, t.y_stride, b0 == 0);
}

template <class M, int... I>
static void run_token_group(int tn, const Tile& t, int64_t t0, const int32_t* off, int64_t b0, int64_t b1,
                            std::integer_sequence<int, I...>) {
  ((tn == I + 1 ? run_tokens<M, I + 1>(t, t0, off, b0, b1) : void()), ...);
}

template <class M>
static void tile_loop(const Tile& t, TileFn plain_tile) {
  constexpr int TM = M::kTokens;
  const int64_t nb = t.n / q4_0::kBlockElems;
  int32_t off[TM * kSlab];
  for (int64_t t0 = 0; t0 < t.n_tokens; t0 += TM) {
    const int tn = static_cast<int>(t.n_tokens - t0 < TM ? t.n_tokens - t0 : TM);
    for (int64_t b0 = 0; b0 < nb; b0 += kSlab) {
      const int64_t b1 = nb - b0 < kSlab ? nb : b0 + kSlab;
      for (int k = 0; k < tn; ++k)
        for (int64_t b = b0; b < b1; ++b) {
          const auto* q = reinterpret_cast<const int8_t*>(t.x + (t0 + k) * t.x_stride + b * q8_0::kBlockBytes + 2);
          int32_t s = 0;
          for (int j = 0; j < 32; ++j) s += q[j];
          off[k * kSlab + (b - b0)] = 8 * s;
        }
      run_token_group<M>(tn, t, t0, off, b0, b1, std::make_integer_sequence<int, TM>{});
    }
  }
  const int64_t full = t.n_rows / kRows * kRows;
  if (full < t.n_rows)
    plain_tile(Tile{t.w + full * t.w_stride, t.w_stride, t.n_rows - full, t.x, t.x_stride, t.n_tokens, t.n,
                    t.y + full, t.y_stride});
}

}  // namespace ns::kernels::q4_0_r16
