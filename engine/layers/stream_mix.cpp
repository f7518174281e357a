#include "engine/layers/stream_mix.h"

#include <immintrin.h>

#include <algorithm>

namespace ns {
namespace {

// Built for the baseline x86-64 (no FMA instruction): nothing to contract.
void mix_scalar(const float* const* rows, const float* w, int64_t n_rows, int64_t begin, int64_t d, float* out) {
  for (int64_t i = begin; i < d; ++i) {
    float v = rows[0][i] * w[0];
    for (int64_t r = 1; r < n_rows; ++r) v += rows[r][i] * w[r];
    out[i] = v;
  }
}

// Explicit multiplies and adds, then the scalar tail. GCC contracts a multiply feeding an add into one fused
// multiply-add where the target has FMA (AVX-512F implies it), intrinsics included; the empty asm makes each
// product a value of its own, so it is rounded before the add as in the scalar loop.

__attribute__((target("avx2"))) int64_t mix_avx2(const float* const* rows, const float* w, int64_t n_rows, int64_t d,
                                                 float* out) {
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(rows[0] + i), _mm256_set1_ps(w[0]));
    for (int64_t r = 1; r < n_rows; ++r) {
      __m256 p = _mm256_mul_ps(_mm256_loadu_ps(rows[r] + i), _mm256_set1_ps(w[r]));
      asm("" : "+v"(p));
      v = _mm256_add_ps(v, p);
    }
    _mm256_storeu_ps(out + i, v);
  }
  return i;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (bug 105593)
__attribute__((target("avx512f"))) int64_t mix_avx512(const float* const* rows, const float* w, int64_t n_rows,
                                                      int64_t d, float* out) {
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(rows[0] + i), _mm512_set1_ps(w[0]));
    for (int64_t r = 1; r < n_rows; ++r) {
      __m512 p = _mm512_mul_ps(_mm512_loadu_ps(rows[r] + i), _mm512_set1_ps(w[r]));
      asm("" : "+v"(p));
      v = _mm512_add_ps(v, p);
    }
    _mm512_storeu_ps(out + i, v);
  }
  return i;
}
#pragma GCC diagnostic pop

}  // namespace

void mix_rows_reference(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out) {
  mix_scalar(rows, w, n_rows, 0, d, out);
}

void mix_rows(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out, kernels::Isa isa) {
  isa = std::min(isa, kernels::detected_isa());
  int64_t done = 0;
  if (isa == kernels::Isa::avx512)
    done = mix_avx512(rows, w, n_rows, d, out);
  else if (isa == kernels::Isa::avx2)
    done = mix_avx2(rows, w, n_rows, d, out);
  mix_scalar(rows, w, n_rows, done, d, out);
}

void mix_rows(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out) {
  mix_rows(rows, w, n_rows, d, out, kernels::active_isa());
}

}  // namespace ns
