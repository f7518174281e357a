// F16 weights x F16 activations, AVX2 + FMA + F16C (widened to float, FMA in
// float), in the summation orders of llama.cpp's x86 CPU backend so that F16
// models reproduce its logits bit for bit:
//  - one token: ggml_vec_dot_f16 (GGML_F16_STEP 32 = 4 accumulators of
//    GGML_F16_EPR 8; reduced (a0+a2)+(a1+a3), then lo+hi halves, then
//    (l0+l1)+(l2+l3); leftovers past the last 32 added in double);
//  - a batch: llamafile's tinyBLAS<8, __m256> (one accumulator per output over
//    the whole row, reduced (l0+l2)+(l1+l3)). llama.cpp uses it only for
//    n >= 2 tokens, rows % 4 == 0 and cols % 8 == 0; matmul.cpp sends other
//    batches through the one-token kernel token by token, as ggml does.
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::f16_avx2 {
namespace {

static inline __m256 load8(const uint8_t* row, int64_t k) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
}
static inline float load1(const uint8_t* row, int64_t k) { return avx2::load_half(row + 2 * k); }

// GGML_F32x8_REDUCE for one accumulator set (GGML_F32_ARR = 4).
static inline float ggml_reduce(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

// ggml_vec_dot_f16 for R rows against one token (x loads shared by the rows).
template <int R>
struct VecDotOrder {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, int64_t n, float* y) {
    __m256 acc[R][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
    const int64_t np = n & ~int64_t{31};
    for (int64_t k = 0; k < np; k += 32) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256 xv = load8(x, k + 8 * j);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(load8(w + r * ws, k + 8 * j), xv, acc[r][j]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      double sum = ggml_reduce(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
      for (int64_t i = np; i < n; ++i) sum += static_cast<double>(load1(w + r * ws, i) * load1(x, i));
      y[r] = static_cast<float>(sum);
    }
  }
};

// tinyBLAS gemm_bloc: R rows x T tokens, one accumulator per output. Rows that
// are not a multiple of 8 (never sent here by matmul) end in float adds.
template <int R, int T>
struct BatchOrder {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    __m256 acc[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
      __m256 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = load8(w + r * ws, k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 xv = load8(x + t * xs, k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        float sum = avx2::hsum(acc[r][t]);  // the same adds as tinyBLAS's hsum(__m256)
        for (int64_t i = k; i < n; ++i) sum += load1(w + r * ws, i) * load1(x + t * xs, i);
        y[t * ys + r] = sum;
      }
    }
  }
};

template <int R, int T>
struct BatchMicro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    BatchOrder<R, T>::run(w, ws, x, xs, n, y, ys);
  }
};

// A lone token keeps 4 accumulators per row, so 3 rows (12 registers) is the
// most that fits beside the loads. Batches use 3 rows x 4 tokens (tinyBLAS
// picks 4 x 3 on 16-register machines; the per-output order is the same).
constexpr int64_t kRowsSingle = 3, kRowsBatch = 3;
constexpr int kTokens = 4;
constexpr avx2::MicroTable<BatchMicro, kRowsBatch, kTokens> kBatchMicro;

void single_token(const Tile& t) {
  int64_t r0 = 0;
  for (; r0 + kRowsSingle <= t.n_rows; r0 += kRowsSingle)
    VecDotOrder<kRowsSingle>::run(t.w + r0 * t.w_stride, t.w_stride, t.x, t.n, t.y + r0);
  for (; r0 < t.n_rows; ++r0) VecDotOrder<1>::run(t.w + r0 * t.w_stride, t.w_stride, t.x, t.n, t.y + r0);
}

}  // namespace

// F16C rounds to nearest even, handles subnormals and quiets NaNs: the same
// halves as the scalar conversion (and as ggml's GGML_F32Cx8_STORE).
void quantize(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) store_u16(out + 2 * i, _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

float vec_dot(const void* w, const void* x, int64_t n) {
  float y;
  VecDotOrder<1>::run(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), n, &y);
  return y;
}

// Every token of a batch, including a last group of one, takes the batch
// order: tinyBLAS computes all outputs of the product the same way.
void tile(const Tile& t) {
  if (t.n_tokens == 1) {
    single_token(t);
  } else {
    avx2::run_micro_tiles(t, kBatchMicro, kRowsBatch, kRowsBatch);
  }
}

}  // namespace ns::kernels::f16_avx2
