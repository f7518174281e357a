#include "engine/layers/gated_delta_net.h"

#include <cmath>
#include <string_view>

#include "engine/layers/layer_shape.h"
#include "engine/state/ops.h"
#include "common/error.h"

// Buffer use (per-token widths from GdnShape, rows of s.n tokens):
//   s.q    [t][conv_dim]   q | k | v projected, convolved in place; o over v
//   s.k    [t][value_dim]  z, then the gated, normed output
//   s.att  [n][2 n_v] the raw b | a (ssm_ba rows, or ssm_beta rows then ssm_alpha rows)
//          | [n][n_v] beta | [n][n_v] g
//   s.out  [t][n_embd]     the layer's output
namespace ns {
namespace {

constexpr std::string_view kLayer = "Gated DeltaNet layer";

[[noreturn]] void bad_shape(const std::string& what) {
  throw Error(ErrorKind::bad_model, std::string(kLayer) + ": " + what);
}

}  // namespace

GdnShape gdn_shape(const Hparams& hp) {
  GdnShape sh;
  sh.head_dim = required_key(hp, hp.ssm_d_state, "ssm.state_size", kLayer);
  sh.n_k_head = required_key(hp, hp.ssm_n_group, "ssm.group_count", kLayer);
  sh.n_v_head = required_key(hp, hp.ssm_dt_rank, "ssm.time_step_rank", kLayer);
  sh.d_conv = required_key(hp, hp.ssm_d_conv, "ssm.conv_kernel", kLayer);
  sh.rms_eps = hp.rms_eps;
  const std::string a = hp.arch + ".";
  if (sh.n_v_head % sh.n_k_head != 0)
    bad_shape(a + "ssm.time_step_rank (" + std::to_string(sh.n_v_head) + " value heads) must be a multiple of " + a +
              "ssm.group_count (" + std::to_string(sh.n_k_head) + " key heads)");
  if (hp.ssm_d_inner != sh.value_dim())
    bad_shape(a + "ssm.inner_size is " + std::to_string(hp.ssm_d_inner) + ", expected time_step_rank * state_size = " +
              std::to_string(sh.value_dim()) + " (key and value heads must have the same size)");
  return sh;
}

void check_gdn_layout(const TensorLoader& t, const std::string& p) {
  if (!t.has(p + "attn_qkv.weight") && t.has(p + "ssm_in.weight"))
    bad_shape(p +
              "ssm_in.weight is the legacy interleaved q/k/v/z projection; re-convert the model with a current "
              "convert_hf_to_gguf.py (it writes attn_qkv and attn_gate)");
}

void gdn_tensors(TensorTable& t, const std::string& p, const GdnShape& sh, int64_t n_embd, GdnWeights& w) {
  using R = TensorRole;
  t.matrix(p + "attn_qkv.weight", sh.conv_dim(), n_embd, R::input, &w.qkv);
  t.matrix(p + "attn_gate.weight", sh.value_dim(), n_embd, R::input, &w.z);
  t.values(p + "ssm_conv1d.weight", {static_cast<uint64_t>(sh.d_conv), static_cast<uint64_t>(sh.conv_dim())}, R::conv,
           &w.conv);
  t.vector(p + "ssm_dt.bias", sh.n_v_head, R::bias, &w.dt_bias);
  t.vector(p + "ssm_a", sh.n_v_head, R::bias, &w.a);
  if (sh.split_beta_alpha) {
    t.matrix(p + "ssm_beta.weight", sh.n_v_head, n_embd, R::input, &w.beta);
    t.matrix(p + "ssm_alpha.weight", sh.n_v_head, n_embd, R::input, &w.alpha);
  } else {
    t.matrix(p + "ssm_ba.weight", 2 * sh.n_v_head, n_embd, R::input, &w.ba);
  }
  t.vector(p + "ssm_norm.weight", sh.head_dim, R::norm, &w.norm);
  t.matrix(p + "ssm_out.weight", n_embd, sh.value_dim(), R::residual, &w.out);
}

void gdn_attention(const GdnWeights& w, const GdnShape& sh, int64_t il, ForwardState& s) {
  const int64_t n = s.n, S = sh.head_dim, n_v = sh.n_v_head, conv_dim = sh.conv_dim(), value_dim = sh.value_dim();
  float* raw = s.att.data();
  float* beta = raw + n * 2 * n_v;
  float* g = beta + n * n_v;

  kernels::matmul(w.qkv, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
  kernels::matmul(w.z, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
  if (sh.split_beta_alpha) {
    kernels::matmul(w.beta, s.xn.data(), n, raw, *s.pool, s.mm);
    kernels::matmul(w.alpha, s.xn.data(), n, raw + n * n_v, *s.pool, s.mm);
  } else {
    kernels::matmul(w.ba, s.xn.data(), n, raw, *s.pool, s.mm);
  }
  causal_conv_silu(s.q.data(), conv_dim, conv_dim, w.conv.data(), sh.d_conv, 0, il, s);

  // beta and the log-decay per value head.
  const int64_t per_k = n_v / sh.n_k_head;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < n_v; ++h) {
      float b, a;
      if (sh.split_beta_alpha) {
        b = raw[t * n_v + h];
        a = raw[n * n_v + t * n_v + h];
      } else {  // per key head: the b of its value heads, then their a
        const float* row = raw + t * 2 * n_v + (h / per_k) * 2 * per_k;
        b = row[h % per_k];
        a = row[per_k + h % per_k];
      }
      beta[t * n_v + h] = sigmoid(b);
      g[t * n_v + h] = softplus(a + w.dt_bias[static_cast<size_t>(h)]) * w.a[static_cast<size_t>(h)];
    }
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < 2 * sh.n_k_head; ++h) l2_norm(&s.q[t * conv_dim + h * S], S, sh.rms_eps);

  DeltaRuleIo io;
  io.n_head = n_v;
  io.n_k_head = sh.n_k_head;
  io.head_dim = S;
  io.tiled_key_heads = sh.tiled_key_heads;
  io.q = s.q.data();
  io.k = s.q.data() + sh.key_dim();
  io.qk_stride = io.v_stride = conv_dim;
  io.v = s.q.data() + 2 * sh.key_dim();
  io.g = g;
  io.per_channel_decay = false;
  io.beta = beta;
  delta_rule(io, il, s);

  // rms_norm(o_h) * ssm_norm * silu(z_h), over z.
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < n_v; ++h) {
      float* o = &s.q[t * conv_dim + 2 * sh.key_dim() + h * S];
      ops::rms_norm(o, w.norm.data(), S, sh.rms_eps, o);
      ops::silu_mul(&s.k[t * value_dim + h * S], o, S);
    }
  kernels::matmul(w.out, s.k.data(), n, s.out.data(), *s.pool, s.mm);
}

}  // namespace ns
