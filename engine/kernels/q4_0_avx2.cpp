// Q4_0 weights x Q8_0 activations, AVX2. Per block: the 32 nibbles unpack to
// bytes 0..15 in element order; maddubs multiplies them (unsigned) with the
// activations (signed); the -8 offset comes off as 8 * (pairwise sums of x),
// computed once per activation block and shared by the R rows; madd to int32,
// then one float FMA with the product of the two scales.
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::q4_0_avx2 {
namespace {

constexpr size_t kWBytes = q4_0::kBlockBytes;
constexpr size_t kXBytes = q8_0::kBlockBytes;

// The 16 bytes go to both 128-bit lanes; the upper lane is shifted right by 4
// so that masking leaves low nibbles (elements 0..15) below, high ones above.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / q4_0::kBlockElems;
  const __m256i eight = _mm256_set1_epi8(8);
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
      q[r] = unpack_nibbles(wb + r * ws + 2);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kXBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
      // Pairwise sums stay within int16: |q * x| pairs <= 2 * 15 * 128, |8 * x| pairs <= 2048.
      const __m256i offset = _mm256_maddubs_epi16(eight, xq);
      const __m256 dx = avx2::broadcast_fp16(xb);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q[r], xq), offset);
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_mul_ps(avx2::broadcast_fp16(wb + r * ws), dx), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]);
}

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 3 x 4 otherwise.
constexpr int kRowsSingle = 4, kRowsBatch = 3, kTokens = 4;
using Kernels = avx2::MicroKernels<Micro, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q4_0_avx2
