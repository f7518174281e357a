// Q5_0 weights x Q8_0 activations, AVX2. Per block: nibbles and fifth bits
// unpack to bytes 0..31 in element order; maddubs multiplies them (unsigned)
// with the activations (signed); the -16 offset comes off as 16 * (pairwise
// sums of x), computed once per activation block and shared by the R rows;
// madd to int32, then one float FMA with d_w * d_x.
// Each block prefetches the bytes the next micro-tile reads, R rows further
// down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q5_0_avx2 {
namespace {

constexpr size_t kWBytes = q5_0::kBlockBytes;
constexpr size_t kXBytes = q8_0::kBlockBytes;

inline __m256i unpack(const uint8_t* blk) {
  const __m256i high = _mm256_and_si256(avx2::expand_bits(blk + 2), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(avx2::unpack_nibbles(blk + 6), high);
}

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / q5_0::kBlockElems;
  const __m256i sixteen = _mm256_set1_epi8(16);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * kWBytes;
    __m256i q[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_rows(wb + r * ws, R, ws);
      q[r] = unpack(wb + r * ws);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
      // Pairwise sums stay within int16: |q * x| pairs <= 2 * 31 * 127, |16 * x| pairs <= 4064.
      const __m256i offset = _mm256_maddubs_epi16(sixteen, xq);
      const __m256 dx = avx2::broadcast_fp16(xb);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q[r], xq), offset);
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(avx2::broadcast_fp16(wb + r * ws), dx), p, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]);
}

// Shapes (as Q4_0's): 4 rows for a lone token, 3 x 4 otherwise; 2 x 4 measured
// the same within noise (one core of a shared Sapphire Rapids VM, 4096-wide rows).
constexpr int kRowsSingle = 4, kRowsBatch = 3, kTokens = 4;
using Kernels = avx2::MicroKernels<Micro, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q5_0_avx2
