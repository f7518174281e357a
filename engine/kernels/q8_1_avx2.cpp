// Q8_1 activation quantizer, AVX2, as ggml's x86 quantize_row_q8_1: Q8_0's
// quantizer (q = x * (127 / amax) rounded half to even) plus
// s = fp16(d * sum(q)). Differs from the reference only on rounding ties.
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::q8_1_avx2 {

void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / q8_1::kBlockElems; ++b, blk += q8_1::kBlockBytes, src += q8_1::kBlockElems) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(src + 8 * i);
    __m256 amax8 = _mm256_andnot_ps(sign_bit, v[0]);
    for (int i = 1; i < 4; ++i) amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, v[i]));
    __m128 amax4 = _mm_max_ps(_mm256_extractf128_ps(amax8, 1), _mm256_castps256_ps128(amax8));
    amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
    amax4 = _mm_max_ss(amax4, _mm_movehdup_ps(amax4));
    const float amax = _mm_cvtss_f32(amax4);

    const float d = amax / 127.0f;
    store_u16(blk, _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
    sum4 = _mm_add_epi32(sum4, _mm_unpackhi_epi64(sum4, sum4));
    sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 1));
    store_u16(blk + 2, _cvtss_sh(d * static_cast<float>(_mm_cvtsi128_si32(sum4)), _MM_FROUND_TO_NEAREST_INT));
    // The packs work per 128-bit lane; the permute puts the 32 bytes back in order.
    const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 4), q8);
  }
}

}  // namespace ns::kernels::q8_1_avx2
