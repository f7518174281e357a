// The indexer's scores in ggml_vec_dot_f32's AVX2 order (indexer.h). Built
// with -ffp-contract=off (CMakeLists.txt): the head sum's product and add stay
// two roundings, as in the reference.
#include <immintrin.h>

#include <vector>

#include "engine/kernels/indexer.h"

namespace ns::kernels::detail {

namespace {

// (lanes i + i+4), then two _mm_hadd_ps: (0 + 1) + (2 + 3), as ggml's GGML_F32x8_REDUCE.
inline float reduce8(__m256 x) {
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

}  // namespace

void indexer_scores_avx2(const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                         int64_t key_stride, int64_t n_keys, float* scores) {
  constexpr int64_t kStep = 32;
  const int64_t end = head_dim - head_dim % kStep;
  thread_local std::vector<float> key_buf;
  key_buf.resize(static_cast<size_t>(head_dim));
  float* key = key_buf.data();
  for (int64_t j = 0; j < n_keys; ++j) {
    const uint16_t* kj = keys + j * key_stride;
    int64_t i = 0;
    for (; i + 8 <= head_dim; i += 8)
      _mm256_storeu_ps(key + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kj + i))));
    for (; i < head_dim; ++i) key[i] = fp16_to_fp32(kj[i]);
    float score = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = q + h * head_dim;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (i = 0; i < end; i += kStep) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i), _mm256_loadu_ps(key + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i + 8), _mm256_loadu_ps(key + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i + 16), _mm256_loadu_ps(key + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i + 24), _mm256_loadu_ps(key + i + 24), a3);
      }
      float dot = reduce8(_mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)));
      for (; i < head_dim; ++i) dot += qh[i] * key[i];
      score += (dot > 0 ? dot : 0.0f) * w[h];
    }
    scores[j] = score;
  }
}

}  // namespace ns::kernels::detail
