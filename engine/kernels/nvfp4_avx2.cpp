// NVFP4 weights x Q8_0 activations, AVX2, in ggml's x86 arithmetic: per
// weight block, each activation block's exact products (8 int32 lanes, four
// per 16-element sub-block) are converted to float and added into one
// accumulator by an FMA with the per-lane scale d_w(sub-block) * d_x; one
// horizontal sum at the end. The codes are looked up in MXFP4's table with a
// byte shuffle and multiplied as in block32_avx2.h (maddubs on |w| and x
// carrying w's sign).
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::nvfp4_avx2 {
namespace {

// Two sub-blocks' 16 code bytes to 32 int8 weights in element order: the
// low nibbles of bytes 0..7, their high nibbles, then the same for bytes 8..15.
inline __m256i weights(const uint8_t* qs, __m256i table) {
  const __m256i v = _mm256_permute4x64_epi64(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))), 0x50);  // qwords 0, 0, 1, 1
  const __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 0, 4, 0)), _mm256_set1_epi8(0x0f));
  return _mm256_shuffle_epi8(table, nibbles);
}

// Sub-block scales s0 (lanes 0..3) and s1 (lanes 4..7), each times dx.
inline __m256 lane_scales(const uint8_t* e, float dx) {
  return _mm256_set_m128(_mm_set1_ps(nvfp4::scale(e[1]) * dx), _mm_set1_ps(nvfp4::scale(e[0]) * dx));
}

struct Format : avx2::StepFormat<nvfp4::kBlockElems, nvfp4::kBlockBytes, 2 * q8_0::kBlockBytes> {
  template <int R, int T>
  static void step(const uint8_t* wb, size_t ws, const uint8_t* xb, size_t xs, __m256 (&acc)[R][T]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mxfp4::kValues)));
    __m256i q01[R], q23[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_rows(wb + r * ws, R, ws);
      q01[r] = weights(wb + r * ws + 4, table);
      q23[r] = weights(wb + r * ws + 4 + 16, table);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xt = xb + t * xs;
      const __m256i x01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 2));
      const __m256i x23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + q8_0::kBlockBytes + 2));
      const float dx0 = load_fp16(xt), dx1 = load_fp16(xt + q8_0::kBlockBytes);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // |w| * (x with w's sign) = w * x; pairs sum to at most 2 * 12 * 127 in int16.
        const __m256i p01 =
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q01[r]), _mm256_sign_epi8(x01, q01[r])), ones);
        const __m256i p23 =
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q23[r]), _mm256_sign_epi8(x23, q23[r])), ones);
        acc[r][t] = _mm256_fmadd_ps(lane_scales(wb + r * ws, dx0), _mm256_cvtepi32_ps(p01), acc[r][t]);
        acc[r][t] = _mm256_fmadd_ps(lane_scales(wb + r * ws + 2, dx1), _mm256_cvtepi32_ps(p23), acc[r][t]);
      }
    }
  }
};

// Shapes: those of the table-lookup formats (iq4_nl_avx2.cpp), not tuned separately.
using Kernels = avx2::StepKernels<Format, 4, 2, 4>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::nvfp4_avx2
