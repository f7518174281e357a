// Q4_0_R16 x Q8_0, AVX-512 + VNNI (the layout and arithmetic: q4_0_r16.h; the
// loop: q4_0_r16_simd.h). A group block's 4 slices are 16 int32 lanes, one per
// row; the low and high nibbles of slice c against the activation's int32 at
// 4 c and 16 + 4 c broadcast: 8 vpdpbusd give the 16 rows' exact block sums,
// then one convert, two multiplies and an add per 16 rows, where the
// row-at-a-time kernel (int8_avx512.h) spends a vpdpbusd, a convert, a
// multiply and an FMA per row.
// GCC 12's AVX-512 intrinsics trip its uninitialized-use analysis (GCC bug
// 105593; see int8_avx512.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "engine/kernels/q4_0_r16_simd.h"

namespace ns::kernels::q4_0_r16_avx512 {
namespace {

using namespace q4_0_r16;

static inline __m512i broadcast_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

struct Micro {
  static constexpr int kTokens = 8;

  template <int T>
  static void run(const uint8_t* g, const uint8_t* x, size_t xs, int64_t b0, int64_t b1, const int32_t* off,
                  float* y, int64_t ys, bool first) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    __m512 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + t * ys);
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* gb = g + b * kGroupBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 128), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(gb + 4 * kGroupBlockBytes + 256), _MM_HINT_T0);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
      __m512i lo[4], hi[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i q = _mm512_loadu_si512(gb + kScaleBytes + 64 * c);
        lo[c] = _mm512_and_si512(q, low);
        hi[c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = x + t * xs + b * q8_0::kBlockBytes;
        __m512i s = _mm512_set1_epi32(-off[t * kSlab + (b - b0)]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          s = _mm512_dpbusd_epi32(s, lo[c], broadcast_i32(xb + 2 + 4 * c));
          s = _mm512_dpbusd_epi32(s, hi[c], broadcast_i32(xb + 18 + 4 * c));
        }
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(load_fp16(xb)));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
  }
};

}  // namespace

void tile(const Tile& t) { tile_loop<Micro>(t, q4_0_avx512::tile); }

}  // namespace ns::kernels::q4_0_r16_avx512
