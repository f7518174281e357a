#include "engine/layers/kda.h"

#include <cmath>
#include <cstring>

#include "engine/ops.h"
#include "engine/sequence_state.h"
#include "engine/util/error.h"
#include "engine/util/thread_pool.h"

// Buffer use (per-token widths from KdaShape, rows of s.n tokens):
//   s.q, s.k, s.v  [t][d_inner]   projections, convolved in place; s.v then holds o
//   s.att          [n][d_inner] g (log-decay) | [n][d_inner] g2 (output gate)
//                  | [n][S] the low-rank projections | [n][n_head] beta
//   s.out          [t][n_embd]    the layer's output
namespace ns {
namespace {

[[noreturn]] void bad_shape(const std::string& what) { throw Error(ErrorKind::bad_model, "KDA layer: " + what); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Causal depthwise convolution over one channel group (d_inner channels) of
// the tokens in batch order, each sequence continuing from its saved inputs;
// then SiLU. `which` picks the q (0), k (1) or v (2) part of the conv state.
void causal_conv(float* x, const std::vector<float>& w, int which, const KdaShape& sh, int64_t il, ForwardState& s) {
  const int64_t d_inner = sh.d_inner(), taps = sh.d_conv, keep = taps - 1;
  s.pool->parallel_for(d_inner, [&](int, int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < s.n; ++t) {
      float* saved = s.seqs->conv(il, s.seq[t]) + which * keep * d_inner;  // [channel][keep], oldest first
      float* row = x + t * d_inner;
      for (int64_t c = c0; c < c1; ++c) {
        float* hist = saved + c * keep;
        const float* wc = &w[static_cast<size_t>(c * taps)];
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

// x / sqrt(sum x^2 + eps), computed as the reference does: an RMS norm with
// eps / n, then a scale by 1/sqrt(n).
void l2_norm(float* x, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps / static_cast<float>(n));
  const float post = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * scale * post;
}

// The gated delta rule for one head over the batch's tokens: q, k, v rows of
// that head (q and k normalized), g its log-decay, beta its mixing weight; o
// is written over v. `decay` is S floats of scratch.
void delta_rule_head(int64_t h, const KdaShape& sh, int64_t il, ForwardState& s, const float* g, const float* beta,
                     float* decay, float* delta) {
  const int64_t S = sh.head_dim, d_inner = sh.d_inner();
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int64_t t = 0; t < s.n; ++t) {
    float* M = s.seqs->recurrent(il, s.seq[t]) + h * S * S;  // M[j][i] = S[i][j]: row j is value channel j
    const float* q = &s.q[t * d_inner + h * S];
    const float* k = &s.k[t * d_inner + h * S];
    float* v = &s.v[t * d_inner + h * S];
    const float* gt = &g[t * d_inner + h * S];
    const float b = beta[t * sh.n_head + h];
    for (int64_t i = 0; i < S; ++i) decay[i] = std::exp(gt[i]);
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

KdaShape kda_shape(const Hparams& hp) {
  KdaShape sh;
  sh.n_head = hp.n_head;
  sh.head_dim = hp.kda_head_dim;
  sh.d_conv = hp.ssm_d_conv;
  sh.rms_eps = hp.rms_eps;
  if (sh.head_dim <= 0) bad_shape("metadata key '" + hp.arch + ".kda.head_dim' is missing or 0");
  if (sh.d_conv <= 0) bad_shape("metadata key '" + hp.arch + ".ssm.conv_kernel' is missing or 0");
  sh.lower_bound_gate = std::isfinite(hp.kda_gate_lower_bound);
  sh.gate_lower_bound = sh.lower_bound_gate ? hp.kda_gate_lower_bound : 0.0f;
  return sh;
}

KdaWeights load_kda(TensorLoader& t, const std::string& p, const KdaShape& sh, int64_t n_embd) {
  const int64_t d_inner = sh.d_inner(), S = sh.head_dim;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  KdaWeights w;
  w.wq = t.matrix(p + "attn_q.weight", d_inner, n_embd);
  w.wk = t.matrix(p + "attn_k.weight", d_inner, n_embd);
  w.wv = t.matrix(p + "attn_v.weight", d_inner, n_embd);
  w.conv_q = t.values(p + "ssm_conv1d_q.weight", {u(sh.d_conv), 1, u(d_inner)});
  w.conv_k = t.values(p + "ssm_conv1d_k.weight", {u(sh.d_conv), 1, u(d_inner)});
  w.conv_v = t.values(p + "ssm_conv1d_v.weight", {u(sh.d_conv), 1, u(d_inner)});
  w.f_a = t.matrix(p + "ssm_f_a.weight", S, n_embd);
  w.f_b = t.matrix(p + "ssm_f_b.weight", d_inner, S);
  w.beta = t.matrix(p + "ssm_beta.weight", sh.n_head, n_embd);
  w.a = t.values(p + "ssm_a", {1, u(sh.n_head)});
  w.dt_bias = t.vector(p + "ssm_dt.bias", d_inner);
  if (t.has(p + "ssm_g.weight")) {
    w.g = t.matrix(p + "ssm_g.weight", d_inner, n_embd);
  } else {
    w.g_a = t.matrix(p + "ssm_g_a.weight", S, n_embd);
    w.g_b = t.matrix(p + "ssm_g_b.weight", d_inner, S);
  }
  w.o_norm = t.vector(p + "ssm_norm.weight", S);
  w.wo = t.matrix(p + "attn_output.weight", n_embd, d_inner);
  return w;
}

void kda_attention(const KdaWeights& w, const KdaShape& sh, int64_t il, ForwardState& s) {
  const int64_t n = s.n, d_inner = sh.d_inner(), S = sh.head_dim, n_head = sh.n_head;
  float* g = s.att.data();
  float* g2 = g + n * d_inner;
  float* low = g2 + n * d_inner;
  float* beta = low + n * S;

  // Projections and the short convolutions.
  kernels::matmul(w.wq, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
  kernels::matmul(w.wk, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
  kernels::matmul(w.wv, s.xn.data(), n, s.v.data(), *s.pool, s.mm);
  causal_conv(s.q.data(), w.conv_q, 0, sh, il, s);
  causal_conv(s.k.data(), w.conv_k, 1, sh, il, s);
  causal_conv(s.v.data(), w.conv_v, 2, sh, il, s);

  // Decay gate, mixing weights, output gate.
  kernels::matmul(w.f_a, s.xn.data(), n, low, *s.pool, s.mm);
  kernels::matmul(w.f_b, low, n, g, *s.pool, s.mm);
  kernels::matmul(w.beta, s.xn.data(), n, beta, *s.pool, s.mm);
  if (w.g.rows > 0) {
    kernels::matmul(w.g, s.xn.data(), n, g2, *s.pool, s.mm);
  } else {
    kernels::matmul(w.g_a, s.xn.data(), n, low, *s.pool, s.mm);
    kernels::matmul(w.g_b, low, n, g2, *s.pool, s.mm);
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < d_inner; ++c) {
      float& x = g[t * d_inner + c];
      const float a = w.a[static_cast<size_t>(c / S)];
      x += w.dt_bias[static_cast<size_t>(c)];
      x = sh.lower_bound_gate ? sh.gate_lower_bound * sigmoid(-(x * a)) : softplus(x) * a;
    }
    for (int64_t h = 0; h < n_head; ++h) {
      float& b = beta[t * n_head + h];
      b = sigmoid(b);
      l2_norm(&s.q[t * d_inner + h * S], S, sh.rms_eps);
      l2_norm(&s.k[t * d_inner + h * S], S, sh.rms_eps);
    }
  }

  // The recurrence, heads spread over the threads (each thread's scratch in s.q16).
  const size_t slot = s.q16.size() / static_cast<size_t>(s.pool->size()) / 2 * 2;  // uint16s, even: floats stay aligned
  if (slot < static_cast<size_t>(kda_scratch_u16(sh)))
    throw Error(ErrorKind::internal, "KDA layer: per-thread scratch of " + std::to_string(slot) + " too small");
  s.pool->parallel_for(n_head, [&](int thread, int64_t h0, int64_t h1) {
    auto* scratch = reinterpret_cast<float*>(&s.q16[static_cast<size_t>(thread) * slot]);
    for (int64_t h = h0; h < h1; ++h) delta_rule_head(h, sh, il, s, g, beta, scratch, scratch + S);
  });

  // Per-head RMS norm, sigmoid gate, output projection.
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < n_head; ++h) {
      float* o = &s.v[t * d_inner + h * S];
      ops::rms_norm(o, w.o_norm.data(), S, sh.rms_eps, o);
      const float* gate = &g2[t * d_inner + h * S];
      for (int64_t i = 0; i < S; ++i) o[i] *= sigmoid(gate[i]);
    }
  kernels::matmul(w.wo, s.v.data(), n, s.out.data(), *s.pool, s.mm);
}

}  // namespace ns
