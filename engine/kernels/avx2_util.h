// Helpers shared by the *_avx2.cpp files (and the *_avx512.cpp ones, whose
// flags include these; no other file: this header needs -mavx2 -mfma -mf16c).
// Everything is static so no AVX2 code can leak, through the linker's choice
// among inline copies, into a path that runs on a CPU without AVX2; for the
// same reason the AVX2 files call no std:: function templates
// (std::integer_sequence below is a type and generates no code).
//
// The product is computed in micro-tiles of R weight rows x T tokens whose
// accumulators live in registers: each weight block is loaded and unpacked once
// per T tokens, each activation block once per R rows.
#pragma once

#include <immintrin.h>

#include <utility>

#include "engine/kernels/format.h"

namespace ns::kernels::avx2 {

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float load_half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// A block's fp16 scale in all 8 lanes: one table load, no shuffle.
static inline __m256 broadcast_fp16(const uint8_t* p) { return _mm256_broadcast_ss(&fp16_table.value[load_u16(p)]); }

// Block formats: requests the bytes at the same position `rows` rows further
// down, which the next micro-tile reads. Quantized rows are short (2.3 KB for
// Q4_0 at 4096 columns), so without this every micro-tile starts its row
// streams cold; measured streaming a 4096 x 4096 matrix from DRAM on one core:
// Q4_0 5.7 -> 9.9 GB/s, Q8_0 9.0 -> 11.9 GB/s (prefetching 512 bytes ahead in
// the same row reached only 7.6 and 10.8). Prefetches never fault, so running
// past the matrix is harmless.
static inline void prefetch_next_rows(const uint8_t* p, int64_t rows, size_t stride) {
  _mm_prefetch(reinterpret_cast<const char*>(p + rows * stride), _MM_HINT_T0);
}

// prefetch_next_rows for every 64-byte line of the R blocks (one per row,
// ws bytes apart) at wb: the K-quant and i-quant blocks span several lines.
template <int R>
static inline void prefetch_next_blocks(const uint8_t* wb, size_t ws, size_t bytes) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    for (size_t off = 0; off < bytes; off += 64) prefetch_next_rows(wb + r * ws + off, R, ws);
}

// Zeroes a micro-tile's R x T accumulators (float or integer vectors, or floats).
template <int R, int T, class V>
static inline void zero_tile(V (&a)[R][T]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) a[r][t] = V{};
}

// R rows x T tokens of the product over whole rows of n elements; R and T are
// template arguments of the kernel, one instantiation per table entry.
using MicroFn = void (*)(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t n, float* y,
                         int64_t y_stride);

// Every micro-kernel size up to RM x TM: fn[r - 1][t - 1] = K<r, t>::run.
template <template <int, int> class K, int RM, int TM, int... I>
static constexpr void fill_micro_table(MicroFn (&fn)[RM][TM], std::integer_sequence<int, I...>) {
  ((fn[I / TM][I % TM] = &K<I / TM + 1, I % TM + 1>::run), ...);
}

template <template <int, int> class K, int RM, int TM>
struct MicroTable {
  MicroFn fn[RM][TM]{};
  constexpr MicroTable() { fill_micro_table<K>(fn, std::make_integer_sequence<int, RM * TM>{}); }
};

// Covers the tile with micro-tiles of up to TM tokens and rows_batch rows, or
// rows_single rows where only one token is left (a lone token has spare
// registers for more rows). Edges get smaller micro-tiles. Tokens are the
// outer loop: the tile's weight rows are few enough to stay in cache while
// every token group passes over them. Measured shapes: see the format files.
template <template <int, int> class K, int RM, int TM>
static inline void run_micro_tiles(const Tile& t, const MicroTable<K, RM, TM>& table, int64_t rows_single,
                                   int64_t rows_batch) {
  for (int64_t t0 = 0; t0 < t.n_tokens; t0 += TM) {
    const int64_t tn = t.n_tokens - t0 < TM ? t.n_tokens - t0 : TM;
    const int64_t step = tn == 1 ? rows_single : rows_batch;
    for (int64_t r0 = 0; r0 < t.n_rows; r0 += step) {
      const int64_t rn = t.n_rows - r0 < step ? t.n_rows - r0 : step;
      table.fn[rn - 1][tn - 1](t.w + r0 * t.w_stride, t.w_stride, t.x + t0 * t.x_stride, t.x_stride, t.n,
                               t.y + t0 * t.y_stride + r0, t.y_stride);
    }
  }
}

// The vec_dot and tile entry points of a micro-kernel family K<R, T>:
// micro-tiles of up to kTokens tokens and kRowsBatch rows, kRowsSingle rows
// for a lone token; vec_dot is K<1, 1>.
template <template <int, int> class K, int kRowsSingle, int kRowsBatch, int kTokens>
struct MicroKernels {
  static constexpr MicroTable<K, (kRowsSingle > kRowsBatch ? kRowsSingle : kRowsBatch), kTokens> kMicro{};

  static float vec_dot(const void* w, const void* x, int64_t n) {
    float y;
    K<1, 1>::run(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n, &y, 0);
    return y;
  }
  static void tile(const Tile& t) { run_micro_tiles(t, kMicro, kRowsSingle, kRowsBatch); }
};

// The micro-kernel of a format given as a block step (Q1_0, Q2_0, NVFP4:
// weight blocks that span several Q8_0 activation blocks, each with a float
// order of its own): F::step<R, T>(wb, ws, xb, xs, acc) adds the products of
// one weight block of R rows (ws bytes apart, at wb) and its activations for
// T tokens (xs bytes apart, at xb) to acc[r][t], F::Acc values zeroed first;
// F::total(acc) is then the dot product. F::kBlockElems and F::kBlockBytes
// are the weight block's, F::kXBytes the activation bytes it spans.
// flatten: a step is inlined whatever its size (GCC kept Q2_0's out of line).
template <class F, int R, int T>
struct StepMicro {
  [[gnu::flatten]] static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y,
                                   int64_t ys) {
    typename F::Acc acc[R][T];
    zero_tile(acc);
    for (int64_t b = 0; b < n / F::kBlockElems; ++b)
      F::template step<R, T>(w + b * F::kBlockBytes, ws, x + b * F::kXBytes, xs, acc);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t * ys + r] = F::total(acc[r][t]);
  }
};

// The fields of a StepMicro format but its step: a block of kElems elements
// in kBytes bytes spanning kActBytes of activations, accumulators of one
// float (kFloatAcc) or 8.
namespace {
template <bool kFloat>
struct AccOf {
  using type = __m256;
};
template <>
struct AccOf<true> {
  using type = float;
};
template <int64_t kElems, size_t kBytes, size_t kActBytes, bool kFloatAcc = false>
struct StepFormat {
  static constexpr int64_t kBlockElems = kElems;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr size_t kXBytes = kActBytes;
  using Acc = typename AccOf<kFloatAcc>::type;
  static float total(__m256 acc) { return hsum(acc); }
  static float total(float acc) { return acc; }
};
}  // namespace

// MicroKernels of a micro-kernel template M<F, R, T> over format F.
template <template <class, int, int> class M, class F>
struct BindFormat {
  template <int R, int T>
  using Micro = M<F, R, T>;
};
template <template <class, int, int> class M, class F, int kRowsSingle, int kRowsBatch, int kTokens>
using KernelsOf = MicroKernels<BindFormat<M, F>::template Micro, kRowsSingle, kRowsBatch, kTokens>;

template <class F, int kRowsSingle, int kRowsBatch, int kTokens>
using StepKernels = KernelsOf<StepMicro, F, kRowsSingle, kRowsBatch, kTokens>;

// Micro-kernel for the float-like formats (F32, F16, BF16), whose weights and
// activations share one element type. Load::load8 widens 8 elements to floats,
// Load::load1 one element (tails of rows that are not a multiple of 8). U
// independent accumulator sets per (row, token) pair: every tile takes one, so
// a pair's float order never depends on how many tokens or rows share its
// micro-tile (a prompt's position then gets the same bits whatever follows
// it); vec_dot takes 4, ggml_vec_dot's order, and hides the FMA latency.
template <class Load, int R, int T, int U>
struct FloatMicroU {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    __m256 acc[U][R][T];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[u][r][t] = _mm256_setzero_ps();

    int64_t k = 0;
    for (; k + 8 * U <= n; k += 8 * U) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        __m256 wv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) wv[r] = Load::load8(w + r * ws, k + 8 * u);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 xv = Load::load8(x + t * xs, k + 8 * u);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) acc[u][r][t] = _mm256_fmadd_ps(wv[r], xv, acc[u][r][t]);
        }
      }
    }
    for (; k + 8 <= n; k += 8) {
      __m256 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = Load::load8(w + r * ws, k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 xv = Load::load8(x + t * xs, k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[0][r][t] = _mm256_fmadd_ps(wv[r], xv, acc[0][r][t]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256 s = acc[0][r][t];
#pragma GCC unroll 4
        for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[u][r][t]);
        float sum = hsum(s);
        for (int64_t i = k; i < n; ++i) sum += Load::load1(w + r * ws, i) * Load::load1(x + t * xs, i);
        y[t * ys + r] = sum;
      }
    }
  }
};
template <class Load, int R, int T>
using FloatMicro = FloatMicroU<Load, R, T, 1>;

// FloatMicro's MicroKernels, with the 4-accumulator vec_dot.
template <class Load, int kRowsSingle, int kRowsBatch, int kTokens>
struct FloatKernels : KernelsOf<FloatMicro, Load, kRowsSingle, kRowsBatch, kTokens> {
  static float vec_dot(const void* w, const void* x, int64_t n) {
    float y;
    FloatMicroU<Load, 1, 1, 4>::run(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n, &y, 0);
    return y;
  }
};

}  // namespace ns::kernels::avx2
