// Q4_1 weights x Q8_1 activations, AVX2. Per block: the nibbles unpack to
// bytes 0..15 in element order and maddubs multiplies them (unsigned) with
// the activations (signed); madd to int32 and one float FMA with d_w * d_x.
// The min contributes m_w * s_x per block, summed apart and added at the end
// (ggml's order).
// Each block prefetches the bytes the next micro-tile reads, R rows further
// down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q4_1_avx2 {
namespace {

constexpr size_t kWBytes = q4_1::kBlockBytes;
constexpr size_t kXBytes = q8_1::kBlockBytes;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / q4_1::kBlockElems;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
  __m128 mins[T];  // lane r: the sum of m_w * s_x of row r
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    mins[t] = _mm_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][t] = _mm256_setzero_ps();
  }

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * kWBytes;
    __m256i q[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_rows(wb + r * ws, R, ws);
      q[r] = avx2::unpack_nibbles(wb + r * ws + 4);
    }
    // The R rows' mins in the lanes of one vector.
    const auto min_of = [&](int r) { return r < R ? load_fp16(wb + r * ws + 2) : 0.0f; };
    const __m128 m = _mm_setr_ps(min_of(0), min_of(1), min_of(2), min_of(3));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4));
      const __m256 dx = avx2::broadcast_fp16(xb);
      mins[t] = _mm_fmadd_ps(m, _mm_broadcast_ss(&fp16_table.value[load_u16(xb + 2)]), mins[t]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // Pairs of q * x stay within int16: 2 * 15 * 127.
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(q[r], xq), ones));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(avx2::broadcast_fp16(wb + r * ws), dx), p, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      float lanes[4];
      _mm_storeu_ps(lanes, mins[t]);
      y[t * ys + r] = avx2::hsum(acc[r][t]) + lanes[r];
    }
}

// Shapes (as Q4_0's): 4 rows for a lone token, 3 x 4 otherwise; 2 x 4 measured
// the same within noise (one core of a shared Sapphire Rapids VM, 4096-wide rows).
constexpr int kRowsSingle = 4, kRowsBatch = 3, kTokens = 4;
using Kernels = avx2::MicroKernels<Micro, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q4_1_avx2
