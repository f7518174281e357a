// Every operation here reproduces the arithmetic of the reference's CPU
// backend (ggml) operation by operation: activations are re-quantized to
// 8 bits before each matmul, so a one-ulp difference can flip a quantized
// value and move logits by ~0.01 (tests/bench/README.md, "Agreement with the reference").
#include "engine/state/ops.h"

#include "engine/kernels/kernels.h"

#include <immintrin.h>

#include <algorithm>

#include <cmath>
#include <cstring>

namespace ns::ops {

// ggml_compute_forward_rms_norm_f32: float squares summed in double, the
// mean rounded to float, scale = 1/sqrtf(mean + eps); then ggml_mul by w.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// ggml's rope cache: theta starts at pos (float) and is multiplied by
// powf(base, -2/rope_dim) once per pair, cosf/sinf in float. The rotation is
// x0*c - x1*s and x0*s + x1*c as the reference's compiler contracts them
// (first product fused): that is what makes cached keys identical to its own.
void rope(float* v, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int64_t pos, float base, float freq_scale,
          RopeType type) {
  const int64_t half = rope_dim / 2;
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(rope_dim));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i, theta *= theta_scale) {
    const float angle = freq_scale * theta;
    const float c = std::cos(angle), s = std::sin(angle);
    // norm: adjacent pairs (2i, 2i+1); neox: (i, i + rope_dim/2).
    const int64_t a = type == RopeType::norm ? 2 * i : i;
    const int64_t b = type == RopeType::norm ? 2 * i + 1 : i + half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* x = v + h * head_dim;
      const float x0 = x[a], x1 = x[b];
      x[a] = std::fma(x0, c, -(x1 * s));
      x[b] = std::fma(x0, s, x1 * c);
    }
  }
}

namespace {

// Both ggml_v_expf variants' first half, one lane: z = x / ln 2 rounded by
// adding 1.5 * 2^23 (its low bits hold n), n, the reduced argument b = x - n ln 2
// (in two parts), and the polynomial's higher terms p, so that
// exp(x) = 2^n (1 + fma(p, b^2, c1 b)).
struct ExpParts {
  float z, n, b, p;
};
ExpParts exp_parts(float x) {
  const float r = 0x1.8p23f;
  ExpParts e;
  e.z = std::fma(x, 0x1.715476p+0f, r);
  e.n = e.z - r;
  e.b = std::fma(-e.n, 0x1.7f7d1cp-20f, std::fma(-e.n, 0x1.62e4p-1f, x));
  const float u = e.b * e.b;
  e.p = std::fma(std::fma(0x1.0e4020p-7f, e.b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, e.b, 0x1.fffdb6p-2f));
  return e;
}
constexpr float kExpC1 = 0x1.ffffecp-1f;

}  // namespace

// ggml_v_expf (AVX2/FMA variant), one lane: a degree-5 polynomial on the
// reduced argument with 2^n put in the exponent bits. Differs from expf by up
// to ~1.5 ulp, which is why it is emulated rather than replaced by expf.
float expf_ggml(float x) {
  const ExpParts ep = exp_parts(x);
  const float z = ep.z, n = ep.n;
  const float j = std::fma(ep.p, ep.b * ep.b, kExpC1 * ep.b);
  uint32_t zbits;
  std::memcpy(&zbits, &z, sizeof zbits);
  const uint32_t e = zbits << 23;
  const auto from_bits = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  const float k = from_bits(e + 0x3f800000u);  // 2^n
  if (!(std::fabs(n) > 126)) return std::fma(j, k, k);
  // Near overflow or underflow: 2^n split in two factors, or saturated.
  const uint32_t g = n <= 0 ? 0x82000000u : 0u;
  const float s1 = from_bits(g + 0x7f000000u), s2 = from_bits(e - g);
  if (std::fabs(n) > 192) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

namespace {

// expf_ggml's operations lane for lane (fnmadd(a, b, c) = fma(-a, b, c)); the
// lanes whose |n| > 126 take the scalar's near-overflow/underflow branch, from
// a copy of x (y may be x).
__attribute__((target("avx2,fma"))) void expf_ggml_avx2(const float* x_in, float* y) {
  alignas(32) float x[8];
  std::memcpy(x, x_in, sizeof x);
  const __m256 r = _mm256_set1_ps(0x1.8p23f), vx = _mm256_load_ps(x);
  const __m256 z = _mm256_fmadd_ps(vx, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), vx));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  _mm256_storeu_ps(y, _mm256_fmadd_ps(j, k, k));
  const __m256 far = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const int lanes = _mm256_movemask_ps(far);
  for (int l = 0; l < 8; ++l)
    if (lanes & (1 << l)) y[l] = expf_ggml(x[l]);
}

}  // namespace

void expf_ggml_8(const float* x, float* y, bool avx2) {
  if (avx2) {
    expf_ggml_avx2(x, y);
    return;
  }
  for (int l = 0; l < 8; ++l) y[l] = expf_ggml(x[l]);
}

// As ggml_soft_max for a short row: float exps summed in double, scaled by float(1/sum).
void softmax(float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// ggml_v_expf, AVX-512 variant, one lane: expf_ggml's polynomial with the 1
// folded into its last FMA, 2^n applied by vscalefps (exact scaling, rounded
// once, denormals kept: ldexp), and |n| > 192 saturated to 0 or infinity.
float expf_ggml_512(float x) {
  const ExpParts ep = exp_parts(x);
  const float n = ep.n;
  const float j = std::fma(ep.p, ep.b * ep.b, std::fma(kExpC1, ep.b, 1.0f));
  if (std::fabs(n) > 192) return n <= 0 ? 0.0f : INFINITY;
  if (std::isnan(n)) return n;
  return std::ldexp(j, static_cast<int>(n));
}

namespace {

// ggml_silu_f32: libm expf, the lanes the vector loops leave.
float silu(float x) { return x / (1.0f + std::exp(-x)); }

// ggml_v_silu: x / (1 + exp(0 - x)), 16 and 8 lanes. GCC 12's AVX-512
// intrinsics trip its uninitialized-use analysis (GCC bug 105593; see
// kernels/int8_avx512.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512dq"))) __m512 v_expf_512(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  if (_mm512_kortestz(d, d)) return res;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(d, res, alt);
}

__attribute__((target("avx512f,avx512dq"))) void expf_ggml_avx512(const float* x, float* y) {
  _mm512_storeu_ps(y, v_expf_512(_mm512_loadu_ps(x)));
}

__attribute__((target("avx512f,avx512dq"))) int64_t silu_mul_avx512(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 15 < n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 e = v_expf_512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
  }
  return i;
}
#pragma GCC diagnostic pop

__attribute__((target("avx2,fma"))) int64_t silu_mul_avx2(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  alignas(32) float e[8];
  for (; i + 7 < n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    _mm256_store_ps(e, _mm256_sub_ps(_mm256_setzero_ps(), x));
    expf_ggml_avx2(e, e);
    const __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_load_ps(e)));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  return i;
}

}  // namespace

void expf_ggml_16(const float* x, float* y, bool avx512) {
  if (avx512) {
    expf_ggml_avx512(x, y);
    return;
  }
  for (int l = 0; l < 16; ++l) y[l] = expf_ggml_512(x[l]);
}

void silu_mul(float* g, const float* u, int64_t n, kernels::Isa isa) {
  int64_t i = 0;
  if (isa == kernels::Isa::avx512)
    i = silu_mul_avx512(g, u, n);
  else if (isa == kernels::Isa::avx2)
    i = silu_mul_avx2(g, u, n);
  for (; i < n; ++i) g[i] = silu(g[i]) * u[i];
}

void silu_mul(float* g, const float* u, int64_t n) { silu_mul(g, u, n, kernels::active_isa()); }

void silu_mul_emulated(float* g, const float* u, int64_t n, kernels::Isa isa) {
  const int64_t lanes = isa == kernels::Isa::avx512 ? 16 : isa == kernels::Isa::avx2 ? 8 : 1;
  const int64_t body = lanes > 1 ? n / lanes * lanes : 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    if (i >= body) {
      g[i] = silu(x) * u[i];
      continue;
    }
    const float e = isa == kernels::Isa::avx512 ? expf_ggml_512(0.0f - x) : expf_ggml(0.0f - x);
    g[i] = x / (1.0f + e) * u[i];
  }
}

void situ_mul(float* g, const float* u, int64_t n, float beta, float linear_beta) {
  const float inv_beta = 1.0f / beta;
  const float inv_linear = linear_beta > 0.0f ? 1.0f / linear_beta : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::tanh(g[i] * inv_beta) * beta * (1.0f / (1.0f + std::exp(-g[i])));
    const float up = linear_beta > 0.0f ? std::tanh(u[i] * inv_linear) * linear_beta : u[i];
    g[i] = a * up;
  }
}

void swiglu_oai_mul(float* g, const float* u, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::clamp(u[i], -limit, limit);
    g[i] = x / (1.0f + std::exp(alpha * (-x))) * (y + 1.0f);
  }
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_scaled(float* x, const float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += s * y[i];
}

}  // namespace ns::ops
