#include "engine/kernels/indexer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ns::kernels {

float indexer_dot_lanes(const float* a, const float* b, int64_t n, int width) {
  constexpr int kAcc = 4;  // ggml's GGML_F32_ARR: GGML_F32_STEP / GGML_F32_EPR
  const int64_t step = kAcc * width, blocks_end = n - n % step;
  float acc[kAcc][16] = {};
  for (int64_t i = 0; i < blocks_end; i += step)
    for (int r = 0; r < kAcc; ++r)
      for (int l = 0; l < width; ++l) {
        const int64_t at = i + r * width + l;
        acc[r][l] = std::fma(a[at], b[at], acc[r][l]);
      }
  float lane[16];
  for (int l = 0; l < width; ++l) {
    const float x0 = acc[0][l] + acc[2][l], x1 = acc[1][l] + acc[3][l];
    lane[l] = x0 + x1;
  }
  // Halved to 4 lanes (lane i + lane i + width/2); then AVX-512's _mm512_reduce_add_ps pairs lanes
  // (0 + 2) + (1 + 3), AVX2's two _mm_hadd_ps (0 + 1) + (2 + 3).
  for (int half = width / 2; half >= 4; half /= 2)
    for (int l = 0; l < half; ++l) lane[l] = lane[l] + lane[l + half];
  float sum = width == 16 ? (lane[0] + lane[2]) + (lane[1] + lane[3]) : (lane[0] + lane[1]) + (lane[2] + lane[3]);
  for (int64_t i = blocks_end; i < n; ++i) {
    const float p = a[i] * b[i];
    sum += p;
  }
  return sum;
}

namespace {

void indexer_scores_scalar(const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                           int64_t key_stride, int64_t n_keys, float* scores) {
  thread_local std::vector<float> key;
  key.resize(static_cast<size_t>(head_dim));
  for (int64_t j = 0; j < n_keys; ++j) {
    dequantize_row(GgmlType::F16, keys + j * key_stride, key.data(), head_dim);
    float score = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = q + h * head_dim;
      float dot = 0;
      for (int64_t i = 0; i < head_dim; ++i) dot += qh[i] * key[static_cast<size_t>(i)];
      score += std::max(dot, 0.0f) * w[h];
    }
    scores[j] = score;
  }
}

}  // namespace

void indexer_scores(Isa isa, const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                    int64_t key_stride, int64_t n_keys, float* scores) {
  isa = std::min(isa, detected_isa());
  if (isa == Isa::avx512)
    detail::indexer_scores_avx512(q, w, n_head, head_dim, keys, key_stride, n_keys, scores);
  else if (isa == Isa::avx2)
    detail::indexer_scores_avx2(q, w, n_head, head_dim, keys, key_stride, n_keys, scores);
  else
    indexer_scores_scalar(q, w, n_head, head_dim, keys, key_stride, n_keys, scores);
}

}  // namespace ns::kernels
