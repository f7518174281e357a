#include "engine/layers/kda.h"

#include <cmath>
#include <cstring>
#include <string_view>

#include "engine/layers/delta_rule.h"
#include "engine/layers/layer_shape.h"
#include "engine/state/ops.h"
#include "engine/state/sequence_state.h"
#include "engine/state/trace.h"
#include "common/error.h"

// Buffer use (per-token widths from KdaShape, rows of s.n tokens):
//   s.q, s.k, s.v  [t][d_inner]   projections, convolved in place; s.v then holds o
//   s.att          [n][d_inner] g (log-decay) | [n][d_inner] g2 (output gate)
//                  | [n][S] the low-rank projections | [n][n_head] beta
//   s.out          [t][n_embd]    the layer's output
namespace ns {
namespace {

constexpr std::string_view kLayer = "KDA layer";

}  // namespace

KdaShape kda_shape(const Hparams& hp) {
  KdaShape sh;
  sh.n_head = hp.n_head;
  sh.head_dim = required_key(hp, hp.kda_head_dim, "kda.head_dim", kLayer);
  sh.d_conv = required_key(hp, hp.ssm_d_conv, "ssm.conv_kernel", kLayer);
  sh.rms_eps = hp.rms_eps;
  sh.lower_bound_gate = std::isfinite(hp.kda_gate_lower_bound);
  sh.gate_lower_bound = sh.lower_bound_gate ? hp.kda_gate_lower_bound : 0.0f;
  return sh;
}

void kda_tensors(TensorTable& t, const std::string& p, const KdaShape& sh, int64_t n_embd, const KdaForm& form,
                 KdaWeights& w) {
  using R = TensorRole;
  const int64_t d_inner = sh.d_inner(), S = sh.head_dim;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  t.values(p + "ssm_conv1d_q.weight", {u(sh.d_conv), 1, u(d_inner), 1}, R::conv, &w.conv_q);
  t.values(p + "ssm_conv1d_k.weight", {u(sh.d_conv), 1, u(d_inner), 1}, R::conv, &w.conv_k);
  t.values(p + "ssm_conv1d_v.weight", {u(sh.d_conv), 1, u(d_inner), 1}, R::conv, &w.conv_v);
  t.matrix(p + "attn_q.weight", d_inner, n_embd, R::input, &w.wq);
  t.matrix(p + "attn_k.weight", d_inner, n_embd, R::input, &w.wk);
  t.matrix(p + "attn_v.weight", d_inner, n_embd, R::input, &w.wv);
  if (form.bailing) {
    t.matrix(p + "ssm_f_a.weight", d_inner, n_embd, R::input, &w.f_a);
  } else {
    t.matrix(p + "ssm_f_a.weight", S, n_embd, R::input, &w.f_a);
    t.matrix(p + "ssm_f_b.weight", d_inner, S, R::input, &w.f_b);
  }
  t.matrix(p + "ssm_beta.weight", sh.n_head, n_embd, R::input, &w.beta);
  const std::vector<uint64_t> a_dims = form.bailing  ? std::vector<uint64_t>{1, u(sh.n_head)}
                                       : form.flat_a ? std::vector<uint64_t>{u(sh.n_head)}
                                                     : std::vector<uint64_t>{1, u(sh.n_head), 1, 1};
  t.values(p + "ssm_a", a_dims, R::bias, &w.a);
  t.vector(p + "ssm_dt.bias", d_inner, R::bias, &w.dt_bias);
  if (form.bailing) {
    t.matrix(p + "ssm_g_a.weight", d_inner, n_embd, R::input, &w.g);
  } else if (form.full_rank_gate) {
    t.matrix(p + "ssm_g.weight", d_inner, n_embd, R::input, &w.g);
  } else {
    t.matrix(p + "ssm_g_a.weight", S, n_embd, R::input, &w.g_a);
    t.matrix(p + "ssm_g_b.weight", d_inner, S, R::input, &w.g_b);
  }
  t.vector(p + "ssm_norm.weight", S, R::norm, &w.o_norm);
  t.matrix(p + "attn_output.weight", n_embd, d_inner, R::residual, &w.wo);
}

void finish_kda(KdaWeights& w, const KdaForm& form) {
  if (form.bailing)
    for (float& a : w.a) a = -a;  // exp(A_log) -> -exp(A_log), exactly
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
  // The conv state holds the q, k and v parts one after the other, [d_inner][d_conv - 1] each.
  const int64_t part = (sh.d_conv - 1) * d_inner;
  causal_conv_silu(s.q.data(), d_inner, d_inner, w.conv_q.data(), sh.d_conv, 0, il, s);
  causal_conv_silu(s.k.data(), d_inner, d_inner, w.conv_k.data(), sh.d_conv, part, il, s);
  causal_conv_silu(s.v.data(), d_inner, d_inner, w.conv_v.data(), sh.d_conv, 2 * part, il, s);

  // Decay gate, mixing weights, output gate.
  if (w.f_b.rows > 0) {
    kernels::matmul(w.f_a, s.xn.data(), n, low, *s.pool, s.mm);
    kernels::matmul(w.f_b, low, n, g, *s.pool, s.mm);
  } else {
    kernels::matmul(w.f_a, s.xn.data(), n, g, *s.pool, s.mm);
  }
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

  trace(s, "kda_gate", il, g, d_inner);  // the reference's node names

  // The recurrence.
  DeltaRuleIo io;
  io.n_head = io.n_k_head = n_head;
  io.head_dim = S;
  io.q = s.q.data();
  io.k = s.k.data();
  io.qk_stride = io.v_stride = d_inner;
  io.v = s.v.data();
  io.g = g;
  io.per_channel_decay = true;
  io.beta = beta;
  delta_rule(io, il, s);
  trace(s, "attn_output", il, s.v.data(), d_inner);

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
