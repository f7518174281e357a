#include "engine/layers/ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ops.h"

namespace ns {

void swiglu(const FfnWeights& w, const float* in, int64_t m, float* a, float* b, float* out, ForwardState& s) {
  const int64_t n_ff = w.gate.rows;
  kernels::matmul(w.gate, in, m, a, *s.pool, s.mm);
  kernels::matmul(w.up, in, m, b, *s.pool, s.mm);
  ops::silu_mul(a, b, m * n_ff);
  kernels::matmul(w.down, a, m, out, *s.pool, s.mm);
}

namespace {

// Picks the top n_used experts of one token's router output. Ties go to the
// lower id, like a stable sort of the probabilities.
void route_token(const float* logits, int64_t n_expert, const MoeWeights& w, float* probs, int32_t* ids, float* weights) {
  std::memcpy(probs, logits, sizeof(float) * static_cast<size_t>(n_expert));
  if (w.gating == ExpertGating::softmax) {
    ops::softmax(probs, n_expert);
  } else {
    for (int64_t e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + std::exp(-probs[e]));
  }
  for (int64_t k = 0; k < w.n_used; ++k) {
    int32_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int64_t j = 0; j < k; ++j) taken |= ids[j] == e;
      if (!taken && (best < 0 || probs[e] > probs[best])) best = static_cast<int32_t>(e);
    }
    ids[k] = best;
    weights[k] = probs[best];
  }
  if (w.normalize_weights) {
    float sum = 0;
    for (int64_t k = 0; k < w.n_used; ++k) sum += weights[k];
    for (int64_t k = 0; k < w.n_used; ++k) weights[k] /= sum;
  }
}

}  // namespace

void moe_ffn(const MoeWeights& w, ForwardState& s) {
  const int64_t n = s.n, n_expert = w.router.rows, n_used = w.n_used, n_embd = w.router.cols;
  kernels::matmul(w.router, s.xn.data(), n, s.router.data(), *s.pool, s.mm);
  for (int64_t t = 0; t < n; ++t)
    route_token(&s.router[t * n_expert], n_expert, w, &s.router[t * n_expert], &s.chosen[t * n_used],
                &s.chosen_w[t * n_used]);

  // Counting sort of the (token, slot) pairs by expert.
  std::fill(s.expert_count.begin(), s.expert_count.begin() + n_expert, 0);
  for (int64_t i = 0; i < n * n_used; ++i) ++s.expert_count[s.chosen[i]];
  int32_t acc = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    s.expert_first[e] = acc;
    acc += s.expert_count[e];
  }
  for (int64_t e = 0; e < n_expert; ++e) s.expert_count[e] = 0;
  for (int64_t i = 0; i < n * n_used; ++i) {
    const int32_t e = s.chosen[i];
    s.expert_rows[s.expert_first[e] + s.expert_count[e]++] = static_cast<int32_t>(i);
  }

  std::fill(s.out.begin(), s.out.begin() + n * n_embd, 0.0f);
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t m = s.expert_count[e];
    if (m == 0) continue;
    const int32_t* rows = &s.expert_rows[s.expert_first[e]];
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(&s.ex_in[j * n_embd], &s.xn[(rows[j] / n_used) * n_embd], sizeof(float) * n_embd);
    const FfnWeights fw{w.gate.expert(e), w.up.expert(e), w.down.expert(e)};
    swiglu(fw, s.ex_in.data(), m, s.ex_a.data(), s.ex_b.data(), s.ex_out.data(), s);
    for (int64_t j = 0; j < m; ++j)
      ops::add_scaled(&s.out[(rows[j] / n_used) * n_embd], &s.ex_out[j * n_embd], s.chosen_w[rows[j]], n_embd);
  }
}

}  // namespace ns
