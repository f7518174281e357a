// The indexer's scores in ggml_vec_dot_f32's AVX-512 order (indexer.h). Built
// with -ffp-contract=off (CMakeLists.txt): the head sum's product and add stay
// two roundings, as in the reference.
// GCC 12 warns about its own intrinsics headers (the AVX-512 casts/extracts), as in int8_avx512.h.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <vector>

#include "engine/kernels/indexer.h"

namespace ns::kernels::detail {

namespace {

// (lanes i + i+8), (i + i+4), then (0 + 2) + (1 + 3): _mm512_reduce_add_ps as GCC expands it.
inline float reduce16(__m512 x) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

}  // namespace

void indexer_scores_avx512(const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                           int64_t key_stride, int64_t n_keys, float* scores) {
  constexpr int64_t kStep = 64;
  const int64_t end = head_dim - head_dim % kStep;
  thread_local std::vector<float> key_buf;
  key_buf.resize(static_cast<size_t>(head_dim));
  float* key = key_buf.data();
  for (int64_t j = 0; j < n_keys; ++j) {
    const uint16_t* kj = keys + j * key_stride;
    int64_t i = 0;
    for (; i + 16 <= head_dim; i += 16)
      _mm512_storeu_ps(key + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kj + i))));
    for (; i < head_dim; ++i) key[i] = fp16_to_fp32(kj[i]);
    float score = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = q + h * head_dim;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (i = 0; i < end; i += kStep) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i), _mm512_loadu_ps(key + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i + 16), _mm512_loadu_ps(key + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i + 32), _mm512_loadu_ps(key + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i + 48), _mm512_loadu_ps(key + i + 48), a3);
      }
      float dot = reduce16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
      for (; i < head_dim; ++i) dot += qh[i] * key[i];
      score += (dot > 0 ? dot : 0.0f) * w[h];
    }
    scores[j] = score;
  }
}

}  // namespace ns::kernels::detail
