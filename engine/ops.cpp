#include "engine/ops.h"

#include <cmath>

namespace ns::ops {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double ss = 0;  // double: the reference sums in ggml_float (double) too
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rope(float* v, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int64_t pos, float base, float freq_scale,
          RopeType type) {
  const int64_t half = rope_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(pos) * freq_scale * std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    const float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    // norm: adjacent pairs (2i, 2i+1); neox: (i, i + rope_dim/2).
    const int64_t a = type == RopeType::norm ? 2 * i : i;
    const int64_t b = type == RopeType::norm ? 2 * i + 1 : i + half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* x = v + h * head_dim;
      const float x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * s;
      x[b] = x0 * s + x1 * c;
    }
  }
}

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

void silu_mul(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_scaled(float* x, const float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += s * y[i];
}

}  // namespace ns::ops
