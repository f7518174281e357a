// Q4_0_R16 x Q8_0, AVX-512 + VNNI (the layout: q4_0_r16.h; the float order,
// the file-layout kernel's, and the loop: q4_0_r16_simd.h). A group block's 4
// slices are 16 int32 lanes, one per row: slice c's low nibbles against the
// activation's int32 at 4 c (high nibbles: 16 + 4 c) broadcast are one
// vpdpbusd for the 16 rows' lane c (4 + c), started from that lane's start
// broadcast, then a convert and an FMA into the lane's accumulator. Per token
// and block: 8 vpdpbusd, 8 converts, 8 FMAs and a multiply for 16 rows, where
// the file layout (int8_avx512.h) spends a vpdpbusd, a convert, a multiply and
// an FMA on 8 lanes per row, and decodes each row's block itself.
// GCC 12's AVX-512 intrinsics trip its uninitialized-use analysis (GCC bug
// 105593; see int8_avx512.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "engine/kernels/q4_0_r16_simd.h"

namespace ns::kernels::q4_0_r16_avx512 {
namespace {

using namespace q4_0_r16;

struct Micro {
  // 8 accumulators per token: 2 tokens keep them, the 8 decoded slices and
  // the scales in the 32 registers.
  static constexpr int kTokens = 2;

  template <int T>
  static void run(const uint8_t* g, const uint8_t* x, size_t xs, const int32_t* starts, int64_t nb, float* y,
                  int64_t ys) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    __m512 acc[T][8];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[t][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
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
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = x + t * xs + b * q8_0::kBlockBytes;
        const int32_t* s = starts + (t * nb + b) * 8;
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(load_fp16(xb)));
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m512i sl = _mm512_dpbusd_epi32(_mm512_set1_epi32(s[c]), lo[c], _mm512_set1_epi32(x_int32(xb, c)));
          acc[t][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sl), d, acc[t][c]);
          const __m512i sh =
              _mm512_dpbusd_epi32(_mm512_set1_epi32(s[4 + c]), hi[c], _mm512_set1_epi32(x_int32(xb, 4 + c)));
          acc[t][4 + c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sh), d, acc[t][4 + c]);
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      _mm512_storeu_ps(y + t * ys, lanes_total(acc[t], [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); }));
  }
};

}  // namespace

void tile(const Tile& t) { tile_loop<Micro>(t, q4_0_avx512::tile); }

}  // namespace ns::kernels::q4_0_r16_avx512
