#include "engine/layers/delta_rule.h"

#include <cmath>
#include <string>

#include "engine/state/sequence_state.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"

namespace ns {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// One head over the batch's tokens; `decay` and `delta` are head_dim floats of scratch.
void delta_rule_head(const DeltaRuleIo& io, int64_t h, int64_t il, ForwardState& s, float* decay, float* delta) {
  const int64_t S = io.head_dim, kh = io.key_head(h);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int64_t t = 0; t < s.n; ++t) {
    float* M = s.seqs->recurrent(il, s.seq[t]) + h * S * S;  // M[j][i] = S[i][j]: row j is value channel j
    const float* q = io.q + t * io.qk_stride + kh * S;
    const float* k = io.k + t * io.qk_stride + kh * S;
    float* v = io.v + t * io.v_stride + h * S;
    const float b = io.beta[t * io.n_head + h];
    if (io.per_channel_decay) {
      const float* gt = io.g + (t * io.n_head + h) * S;
      for (int64_t i = 0; i < S; ++i) decay[i] = std::exp(gt[i]);
    } else {
      const float d = std::exp(io.g[t * io.n_head + h]);
      for (int64_t i = 0; i < S; ++i) decay[i] = d;
    }
    for (int64_t j = 0; j < S; ++j) {
      float* row = M + j * S;
      float sk = 0.0f;
      for (int64_t i = 0; i < S; ++i) {
        row[i] *= decay[i];
        sk += row[i] * k[i];
      }
      delta[j] = (v[j] - sk) * b;
    }
    for (int64_t j = 0; j < S; ++j) {
      float* row = M + j * S;
      float o = 0.0f;
      for (int64_t i = 0; i < S; ++i) {
        row[i] += k[i] * delta[j];
        o += row[i] * q[i];
      }
      v[j] = o * scale;
    }
  }
}

}  // namespace

void causal_conv_silu(float* x, int64_t stride, int64_t channels, const float* w, int64_t taps, int64_t state_offset,
                      int64_t il, ForwardState& s) {
  const int64_t keep = taps - 1;
  s.pool->parallel_for(channels, [&](int, int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < s.n; ++t) {
      float* saved = s.seqs->conv(il, s.seq[t]) + state_offset;  // [channel][keep], oldest first
      float* row = x + t * stride;
      for (int64_t c = c0; c < c1; ++c) {
        float* hist = saved + c * keep;
        const float* wc = w + c * taps;
        const float in = row[c];
        float sum = 0.0f;
        for (int64_t j = 0; j < keep; ++j) sum += hist[j] * wc[j];
        sum += in * wc[keep];
        for (int64_t j = 0; j + 1 < keep; ++j) hist[j] = hist[j + 1];
        if (keep > 0) hist[keep - 1] = in;
        row[c] = silu(sum);
      }
    }
  });
}

void l2_norm(float* x, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps / static_cast<float>(n));
  const float post = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * scale * post;
}

void delta_rule(const DeltaRuleIo& io, int64_t il, ForwardState& s) {
  const int64_t S = io.head_dim;
  if (io.n_k_head <= 0 || io.n_head % io.n_k_head != 0)
    throw Error(ErrorKind::internal, "delta rule: " + std::to_string(io.n_head) + " value heads over " +
                                         std::to_string(io.n_k_head) + " key heads");
  const size_t slot = s.q16.size() / static_cast<size_t>(s.pool->size()) / 2 * 2;  // uint16s, even: floats stay aligned
  if (slot < static_cast<size_t>(delta_rule_scratch_u16(S)))
    throw Error(ErrorKind::internal, "delta rule: per-thread scratch of " + std::to_string(slot) + " too small");
  s.pool->parallel_for(io.n_head, [&](int thread, int64_t h0, int64_t h1) {
    auto* scratch = reinterpret_cast<float*>(&s.q16[static_cast<size_t>(thread) * slot]);
    for (int64_t h = h0; h < h1; ++h) delta_rule_head(io, h, il, s, scratch, scratch + S);
  });
}

}  // namespace ns
