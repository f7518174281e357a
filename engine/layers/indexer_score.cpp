#include "engine/layers/indexer_score.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns {
namespace {

constexpr int kAcc = 4;  // ggml's GGML_F32_ARR: accumulators of the F32 dot product

// The lanes' horizontal sum as ggml's reduce of one vector: 8 lanes as GGML_F32x8_REDUCE's tail, 16 as GCC's
// _mm512_reduce_add_ps.
float hsum_lanes(const float* l, int width) {
  float r[4];
  if (width == 16) {
    float h[8];
    for (int i = 0; i < 8; ++i) h[i] = l[i] + l[i + 8];
    for (int i = 0; i < 4; ++i) r[i] = h[i] + h[i + 4];
    return (r[0] + r[2]) + (r[1] + r[3]);
  }
  for (int i = 0; i < 4; ++i) r[i] = l[i] + l[i + 4];
  return (r[0] + r[1]) + (r[2] + r[3]);
}

// ggml_vec_dot_f32(x, y) in the order above, lane by lane.
float dot_reference(const float* x, const float* y, int64_t n, int width) {
  float acc[kAcc][16] = {};
  for (int64_t i = 0; i < n; i += kAcc * width)
    for (int j = 0; j < kAcc; ++j)
      for (int l = 0; l < width; ++l) {
        const int64_t e = i + j * width + l;
        acc[j][l] = std::fma(x[e], y[e], acc[j][l]);
      }
  for (int l = 0; l < width; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < width; ++l) acc[0][l] += acc[1][l];
  return hsum_lanes(acc[0], width);
}

// The heads' sum, plain float arithmetic (this file is built without FMA: no contraction).
float head_sum(const float* dots, const float* w, int64_t n_head) {
  float score = 0.0f;
  for (int64_t h = 0; h < n_head; ++h) score += std::max(dots[h], 0.0f) * w[h];
  return score;
}

__attribute__((target("avx2,fma,f16c"))) void dots_avx2(const float* q, int64_t n_head, int64_t dim,
                                                        const uint16_t* k16, float* kf, float* dots) {
  for (int64_t i = 0; i < dim; i += 8)
    _mm256_storeu_ps(kf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k16 + i))));
  for (int64_t h = 0; h < n_head; ++h) {
    const float* x = q + h * dim;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < dim; i += 32) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(kf + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(kf + i + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(kf + i + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(kf + i + 24), a3);
    }
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    dots[h] = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  }
}

// GCC 12 warns inside its own AVX-512 intrinsics (their `__Y = __Y` undefined vectors); nothing here is unset.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512dq"))) void dots_avx512(const float* q, int64_t n_head, int64_t dim,
                                                             const uint16_t* k16, float* kf, float* dots) {
  for (int64_t i = 0; i < dim; i += 16)
    _mm512_storeu_ps(kf + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k16 + i))));
  for (int64_t h = 0; h < n_head; ++h) {
    const float* x = q + h * dim;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < dim; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(kf + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(kf + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(kf + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(kf + i + 48), a3);
    }
    a0 = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
    // _mm512_reduce_add_ps's order, spelled out (the reference's build is GCC's): l + l8, l + l4, then pairs.
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
    const __m128 r = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 p = _mm_add_ps(r, _mm_movehl_ps(r, r));  // r0 + r2, r1 + r3
    dots[h] = _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
  }
}
#pragma GCC diagnostic pop

void check_dim(int64_t dim) {
  if (dim <= 0 || dim % 64 != 0)
    throw std::invalid_argument("indexer_scores: key length " + std::to_string(dim) + " is not a multiple of 64");
}

}  // namespace

void indexer_scores_reference(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k,
                              int64_t k_stride, int64_t n, float* out, int width) {
  check_dim(dim);
  std::vector<float> kf(static_cast<size_t>(dim)), dots(static_cast<size_t>(n_head));
  for (int64_t j = 0; j < n; ++j) {
    kernels::dequantize_row(gguf::GgmlType::F16, k + j * k_stride, kf.data(), dim);
    for (int64_t h = 0; h < n_head; ++h)
      dots[static_cast<size_t>(h)] = dot_reference(q + h * dim, kf.data(), dim, width);
    out[j] = head_sum(dots.data(), w, n_head);
  }
}

void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k, int64_t k_stride,
                    int64_t n, float* out, kernels::Isa isa, int width) {
  check_dim(dim);
  isa = std::min(isa, kernels::detected_isa());
  const bool simd = (width == 16 && isa == kernels::Isa::avx512) || (width == 8 && isa >= kernels::Isa::avx2);
  if (!simd) {
    indexer_scores_reference(q, w, n_head, dim, k, k_stride, n, out, width);
    return;
  }
  thread_local std::vector<float> kf, dots;  // per pool thread, grown to the largest sizes seen
  if (kf.size() < static_cast<size_t>(dim)) kf.resize(static_cast<size_t>(dim));
  if (dots.size() < static_cast<size_t>(n_head)) dots.resize(static_cast<size_t>(n_head));
  for (int64_t j = 0; j < n; ++j) {
    if (width == 16)
      dots_avx512(q, n_head, dim, k + j * k_stride, kf.data(), dots.data());
    else
      dots_avx2(q, n_head, dim, k + j * k_stride, kf.data(), dots.data());
    out[j] = head_sum(dots.data(), w, n_head);
  }
}

void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k, int64_t k_stride,
                    int64_t n, float* out) {
  const kernels::Isa isa = kernels::active_isa();
  indexer_scores(q, w, n_head, dim, k, k_stride, n, out, isa, isa == kernels::Isa::avx512 ? 16 : 8);
}

}  // namespace ns
