// Element-wise and per-row operations of the forward pass (F32, scalar loops
// the compiler vectorizes; the heavy work is in kernels::matmul). They follow
// the reference implementation's arithmetic to the bit where it matters.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"
#include "engine/spec/hparams.h"

namespace ns::ops {

// out[i] = x[i] / rms(x) * w[i]; out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
// Rotates the first rope_dim dims of each of n_heads vectors of head_dim at
// position pos (angles from ggml's float recurrence, not a double pow).
void rope(float* v, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int64_t pos, float base, float freq_scale,
          RopeType type);
// In place: x = exp(x - max) / sum.
void softmax(float* x, int64_t n);
// exp(x) computed exactly as ggml_v_expf (the reference's vectorized exp).
float expf_ggml(float x);
// y[l] = expf_ggml(x[l]) for 8 lanes, the same bits; with avx2 (the caller
// checked the CPU has AVX2 + FMA) as 8-wide vector operations. y may be x.
void expf_ggml_8(const float* x, float* y, bool avx2);
// exp(x) as ggml_v_expf's AVX-512 variant computes it (the reference built
// for AVX-512): expf_ggml's polynomial, the 1 in its last FMA, 2^n by scaling.
float expf_ggml_512(float x);
// y[l] = expf_ggml_512(x[l]) for 16 lanes, the same bits; with avx512 (the
// caller checked the CPU has AVX-512F/DQ) as one 16-wide vector exp. y may be x.
void expf_ggml_16(const float* x, float* y, bool avx512);
// g[i] = silu(g[i]) * u[i] over one row, as ggml_vec_swiglu_f32 computes it:
// groups of 16 (avx512) or 8 (avx2) lanes through the reference's vector exp
// of that width (x / (1 + v_expf(0 - x)), then * u), the rest of the row
// and the scalar path through libm's expf. Without isa: the active one
// (kernels::active_isa).
void silu_mul(float* g, const float* u, int64_t n, kernels::Isa isa);
void silu_mul(float* g, const float* u, int64_t n);
// silu_mul(..., isa)'s bits, one lane at a time in scalar code (the tests'
// reference for each vector path).
void silu_mul_emulated(float* g, const float* u, int64_t n, kernels::Isa isa);
// g[i] = situ(g[i], u[i]) = beta*tanh(g/beta)*sigmoid(g) * (linear_beta > 0 ?
// linear_beta*tanh(u/linear_beta) : u): kimi-k3's activation, in the
// reference's order of float operations (scales by 1/beta, not divisions).
void situ_mul(float* g, const float* u, int64_t n, float beta, float linear_beta);
// g[i] = gpt-oss's clamped SwiGLU of (g[i], u[i]): x = min(g, limit),
// y = clamp(u, -limit, limit), x / (1 + exp(-alpha x)) * (y + 1), as the
// reference's swiglu_oai kernel computes it (libm expf, its operation order).
void swiglu_oai_mul(float* g, const float* u, int64_t n, float alpha, float limit);
void add(float* x, const float* y, int64_t n);                  // x += y
void add_scaled(float* x, const float* y, float s, int64_t n);  // x += s * y

}  // namespace ns::ops
