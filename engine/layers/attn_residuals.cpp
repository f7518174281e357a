#include "engine/layers/attn_residuals.h"

#include <cmath>
#include <cstring>

#include "engine/state/ops.h"
#include "engine/util/thread_pool.h"

namespace ns {
namespace {

// sum_i (v_i * scale) * w_i with ggml's rms_norm scale (squares summed in
// double, mean rounded to float) and a double sum as sum_rows keeps.
float score(const float* v, const float* w, int64_t d, float eps) {
  double sq = 0;
  for (int64_t i = 0; i < d; ++i) sq += static_cast<double>(v[i] * v[i]);
  const float mean = static_cast<float>(sq / static_cast<double>(d));
  const float scale = 1.0f / std::sqrt(mean + eps);
  double sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(v[i] * scale * w[i]);
  return static_cast<float>(sum);
}

}  // namespace

void res_mix(const float* ckpt, int64_t n_ckpt, const float* cur, const float* score_w, int64_t d, float eps,
             float* scores, float* out) {
  if (n_ckpt == 0) {
    if (out != cur) std::memcpy(out, cur, sizeof(float) * static_cast<size_t>(d));
    return;
  }
  for (int64_t c = 0; c < n_ckpt; ++c) scores[c] = score(ckpt + c * d, score_w, d, eps);
  scores[n_ckpt] = score(cur, score_w, d, eps);
  ops::softmax(scores, n_ckpt + 1);
  const float p_cur = scores[n_ckpt];
  for (int64_t i = 0; i < d; ++i) {
    float sum = 0.0f;
    for (int64_t c = 0; c < n_ckpt; ++c) sum += ckpt[c * d + i] * scores[c];
    out[i] = sum + cur[i] * p_cur;
  }
}

void res_mix_all(ForwardState& s, int64_t n_ckpt, int64_t max_ckpt, const float* score_w, int64_t d, float eps,
                 float* out) {
  s.pool->parallel_for(s.n, [&](int, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      res_mix(&s.res_ckpt[static_cast<size_t>(t * max_ckpt * d)], n_ckpt, &s.x[t * d], score_w, d, eps,
              &s.res_scores[static_cast<size_t>(t * (max_ckpt + 1))], &out[t * d]);
  });
}

}  // namespace ns
