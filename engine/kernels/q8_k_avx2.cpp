// Q8_K activation quantizer, AVX2, bit-exact with the reference (q8_k.cpp):
// the same scale from the first value of largest magnitude, and conversion
// with the default rounding mode (to nearest, ties to even) is ggml's
// nearest_int for |v| <= 127.
#include <cstring>

#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::q8_k_avx2 {

void quantize(const float* src, void* dst, int64_t n) {
  using L = kq::Q8K;
  auto* blk = static_cast<uint8_t*>(dst);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i max_level = _mm256_set1_epi32(127);
  for (int64_t b = 0; b < n / q8_k::kBlockElems; ++b, blk += q8_k::kBlockBytes, src += q8_k::kBlockElems) {
    __m256 amax8 = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(src + 8 * i)));
    __m128 amax4 = _mm_max_ps(_mm256_extractf128_ps(amax8, 1), _mm256_castps256_ps128(amax8));
    amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
    amax4 = _mm_max_ss(amax4, _mm_movehdup_ps(amax4));
    const float amax = _mm_cvtss_f32(amax4);
    if (amax == 0.0f) {
      std::memset(blk, 0, q8_k::kBlockBytes);
      continue;
    }
    // The sign of the scale comes from the first value of largest magnitude.
    float max = 0;
    for (int j = 0; j < q8_k::kBlockElems; ++j) {
      if (src[j] == amax || src[j] == -amax) {
        max = src[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vscale = _mm256_set1_ps(iscale);
    for (int g = 0; g < 8; ++g) {  // 32 values per step
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        q[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + 32 * g + 8 * i), vscale)),
                                max_level);
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i s8 = _mm256_add_epi32(q[2 * h], q[2 * h + 1]);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        const auto sum = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
        std::memcpy(blk + L::bsums + 2 * (2 * g + h), &sum, sizeof sum);
      }
      const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
      const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
      const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + L::qs + 32 * g), q8);
    }
    const float d = 1 / iscale;
    std::memcpy(blk + L::d, &d, sizeof d);
  }
}

}  // namespace ns::kernels::q8_k_avx2
