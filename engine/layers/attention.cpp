#include "engine/layers/attention.h"

#include <cmath>
#include <cstring>

#include "engine/kv_cache.h"
#include "engine/ops.h"
#include "engine/util/thread_pool.h"

namespace ns {

void attend_one_head(const float* q, const float* k_base, int64_t k_stride, const float* v_base, int64_t v_stride,
                     int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* scores, float* out) {
  for (int64_t j = 0; j <= last_pos; ++j) {
    const float* k = k_base + j * k_stride;
    float dot = 0;
    for (int64_t d = 0; d < qk_dim; ++d) dot += q[d] * k[d];
    scores[j] = dot * scale;
  }
  ops::softmax(scores, last_pos + 1);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(v_dim));
  for (int64_t j = 0; j <= last_pos; ++j) ops::add_scaled(out, v_base + j * v_stride, scores[j], v_dim);
}

void gqa_attention(const GqaWeights& w, const Hparams& hp, int64_t il, ForwardState& s) {
  const int64_t n = s.n, hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;
  const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
  kernels::matmul(w.wq, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
  kernels::matmul(w.wk, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
  kernels::matmul(w.wv, s.xn.data(), n, s.v.data(), *s.pool, s.mm);

  KvCache& kv = *s.kv;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = s.pos0 + t;
    ops::rope(&s.q[t * q_dim], n_head, hd, hp.rope_dim, pos, hp.rope_base, hp.rope_freq_scale, hp.rope_type);
    ops::rope(&s.k[t * kv_dim], n_kv, hd, hp.rope_dim, pos, hp.rope_base, hp.rope_freq_scale, hp.rope_type);
    std::memcpy(kv.k(il, pos), &s.k[t * kv_dim], sizeof(float) * kv_dim);
    std::memcpy(kv.v(il, pos), &s.v[t * kv_dim], sizeof(float) * kv_dim);
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = n_head / n_kv;
  const int64_t n_ctx = kv.n_ctx();
  s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
    float* scores = &s.scores[static_cast<size_t>(thread) * n_ctx];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_head, h = i % n_head, kh = h / group;
      attend_one_head(&s.q[t * q_dim + h * hd], kv.k(il, 0) + kh * hd, kv_dim, kv.v(il, 0) + kh * hd, kv_dim, hd, hd,
                      s.pos0 + t, scale, scores, &s.att[t * q_dim + h * hd]);
    }
  });
  kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
}

}  // namespace ns
