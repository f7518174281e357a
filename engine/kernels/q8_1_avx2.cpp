// Q8_1 activation quantizer, AVX2, as ggml's x86 quantize_row_q8_1: Q8_0's
// quantizer (q = x * (127 / amax) rounded half to even) plus
// s = fp16(d * sum(q)). Differs from the reference only on rounding ties.
#include "engine/kernels/formats.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q8_1_avx2 {

void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / q8_1::kBlockElems; ++b, blk += q8_1::kBlockBytes, src += q8_1::kBlockElems) {
    __m256i q[4];
    const float d = avx2::quantize_q8_lanes(src, q) / 127.0f;
    store_u16(blk, _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
    sum4 = _mm_add_epi32(sum4, _mm_unpackhi_epi64(sum4, sum4));
    sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 1));
    store_u16(blk + 2, _cvtss_sh(d * static_cast<float>(_mm_cvtsi128_si32(sum4)), _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 4), avx2::pack_q8(q));
  }
}

}  // namespace ns::kernels::q8_1_avx2
