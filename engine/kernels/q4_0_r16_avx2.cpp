// Q4_0_R16 x Q8_0, AVX2 (the layout: q4_0_r16.h; the float order, the file-
// layout kernel's, and the loop: q4_0_r16_simd.h). A 64-byte slice is two
// registers of 8 rows; per half, slice c's low nibbles against the
// activation's int32 at 4 c broadcast (high nibbles: 16 + 4 c) give, after a
// maddubs, a madd with ones and the lane's start added, the 8 rows' lane c
// (4 + c), then a convert and an FMA into the lane's accumulator. A half's
// slices are decoded once per block for 4 tokens, whose 32 accumulators live
// in L1 (16 registers hold the slices and the constants).
#include <immintrin.h>

#include "engine/kernels/q4_0_r16_simd.h"

namespace ns::kernels::q4_0_r16_avx2 {
namespace {

using namespace q4_0_r16;

struct Micro {
  static constexpr int kTokens = 4;  // 1 (accumulators in registers, slices decoded per token) was slower

  template <int T>
  static void run(const uint8_t* g, const uint8_t* x, size_t xs, const int32_t* starts, int64_t nb, float* y,
                  int64_t ys) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int h = 0; h < 2; ++h) {
      __m256 acc[T][8];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) acc[t][j] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* gb = g + b * kGroupBlockBytes;
        _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 128), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 256), _MM_HINT_T0);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * h)));
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + kScaleBytes + 64 * c + 32 * h));
          lo[c] = _mm256_and_si256(q, low);
          hi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = x + t * xs + b * q8_0::kBlockBytes;
          const int32_t* s = starts + (t * nb + b) * 8;
          const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(load_fp16(xb)));
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256i sl = _mm256_add_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], _mm256_set1_epi32(x_int32(xb, c))), ones),
                _mm256_set1_epi32(s[c]));
            acc[t][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sl), d, acc[t][c]);
            const __m256i sh = _mm256_add_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], _mm256_set1_epi32(x_int32(xb, 4 + c))), ones),
                _mm256_set1_epi32(s[4 + c]));
            acc[t][4 + c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sh), d, acc[t][4 + c]);
          }
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        _mm256_storeu_ps(y + t * ys + 8 * h,
                         lanes_total(acc[t], [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); }));
    }
  }
};

}  // namespace

void tile(const Tile& t) { tile_loop<Micro>(t, q4_0_avx2::tile); }

}  // namespace ns::kernels::q4_0_r16_avx2
