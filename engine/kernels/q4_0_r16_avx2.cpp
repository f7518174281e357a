// Q4_0_R16 x Q8_0, AVX2 (the layout and arithmetic: q4_0_r16.h; the loop:
// q4_0_r16_simd.h). A 64-byte slice is two registers of 8 rows; per half the
// 8 maddubs of the low and high nibbles with the broadcast activation int32s
// add up in int16 (each pair at most 2 * 15 * 127, eight of them 30480), one
// madd with ones gives the 8 rows' exact block sums: a convert, two multiplies
// and an add per 8 rows.
#include <immintrin.h>

#include "engine/kernels/q4_0_r16_simd.h"

namespace ns::kernels::q4_0_r16_avx2 {
namespace {

using namespace q4_0_r16;

static inline __m256i broadcast_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

struct Micro {
  static constexpr int kTokens = 4;

  template <int T>
  static void run(const uint8_t* g, const uint8_t* x, size_t xs, int64_t b0, int64_t b1, const int32_t* off,
                  float* y, int64_t ys, bool first) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][T];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[h][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ys + 8 * h);
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* gb = g + b * kGroupBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 128), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 256), _MM_HINT_T0);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
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
          __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[c], broadcast_i32(xb + 2 + 4 * c)));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[c], broadcast_i32(xb + 18 + 4 * c)));
          }
          const __m256i s =
              _mm256_sub_epi32(_mm256_madd_epi16(p, ones), _mm256_set1_epi32(off[t * kSlab + (b - b0)]));
          const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(load_fp16(xb)));
          acc[h][t] = _mm256_add_ps(acc[h][t], _mm256_mul_ps(_mm256_cvtepi32_ps(s), d));
        }
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ys + 8 * h, acc[h][t]);
  }
};

}  // namespace

void tile(const Tile& t) { tile_loop<Micro>(t, q4_0_avx2::tile); }

}  // namespace ns::kernels::q4_0_r16_avx2
