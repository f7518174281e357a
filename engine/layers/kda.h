// Kimi Delta Attention (KDA): the linear-attention layer of kimi-linear,
// kimi-k3 and bailingmoe3, a gated delta rule with a fixed-size state per sequence. Per token x
// (the normed layer input) and head h (head size S, d_inner = n_head * S):
//
//   q, k, v = silu(causal_conv(W_{q,k,v} x))    depthwise, d_conv taps per channel,
//                                               the last d_conv - 1 inputs kept per sequence
//   q, k    = l2_norm(q_h), l2_norm(k_h)        per head
//   g       = A_h * softplus(f(x) + dt_bias)               (log-decay per key channel, <= 0)
//          or lower_bound * sigmoid(-A_h * (f(x) + dt_bias)) (kda.gate_lower_bound set: kimi-k3, bailingmoe3)
//             f = f_b(f_a(x)) (low rank), or f_a(x) alone (full rank: bailingmoe3)
//   beta    = sigmoid(W_beta x)_h
//   S       = diag(exp(g)) S                    (S: [key S][value S] per head)
//   S      += k (beta (v - S^T k))^T            (the delta rule)
//   o       = S^T q / sqrt(S)
//   out     = W_o (rms_norm(o_h) * o_norm * sigmoid(g2_h))   g2 = g_b(g_a(x)) (kimi-linear), or one
//                                                           full-rank matrix (ssm_g: kimi-k3; ssm_g_a: bailingmoe3)
//
// A_h is -exp(A_log): kimi's converters store it so (ssm_a); bailingmoe3's
// stores exp(A_log), which finish_kda negates after loading.
// The convolutions, l2 norms and the recurrence are the shared delta-rule
// pieces (delta_rule.h: the reference's CPU computation, token by token, for
// prefill as for decode), here with one decay per key channel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/layers/delta_rule.h"
#include "engine/spec/hparams.h"
#include "engine/spec/tensor_loader.h"
#include "engine/spec/tensor_table.h"

namespace ns {

struct KdaShape {
  int64_t n_head = 0, head_dim = 0, d_conv = 0;
  float rms_eps = 1e-6f;          // the l2 norms and the output norm
  bool lower_bound_gate = false;  // the sigmoid decay-gate form (kda.gate_lower_bound)
  float gate_lower_bound = 0.0f;

  int64_t d_inner() const { return n_head * head_dim; }
  // Per sequence: the q, k and v convolutions' last d_conv - 1 inputs, and the delta-rule states.
  int64_t conv_floats() const { return 3 * (d_conv - 1) * d_inner(); }
  int64_t state_floats() const { return n_head * head_dim * head_dim; }
  // Per-token widths of the ForwardState buffers kda_attention uses.
  int64_t q_width() const { return d_inner(); }                            // s.q, s.k, s.v each
  int64_t att_width() const { return 2 * d_inner() + head_dim + n_head; }  // s.att: g | g2 | low rank | beta
};

// Per-thread scratch the recurrence needs in s.q16, in uint16s (two rows of head_dim floats).
inline int64_t kda_scratch_u16(const KdaShape& sh) { return delta_rule_scratch_u16(sh.head_dim); }

// From kda.head_dim, ssm.conv_kernel, head_count and the gate settings; throws
// ns::Error(bad_model) naming the missing key.
KdaShape kda_shape(const Hparams& hp);

struct KdaWeights {
  kernels::MatrixView wq, wk, wv;             // [d_inner][n_embd]
  std::vector<float> conv_q, conv_k, conv_v;  // [d_inner][d_conv], oldest tap first
  kernels::MatrixView f_a, f_b;               // [S][n_embd], [d_inner][S]: the decay gate's low-rank projection,
                                              // or f_a [d_inner][n_embd] alone (full rank; f_b.rows == 0)
  kernels::MatrixView beta;                   // [n_head][n_embd]
  std::vector<float> a;                       // [n_head]: -exp(A_log)
  std::vector<float> dt_bias;                 // [d_inner]
  kernels::MatrixView g_a, g_b;               // [S][n_embd], [d_inner][S]: output gate, low rank (kimi-linear)
  kernels::MatrixView g;                      // [d_inner][n_embd]: output gate, full rank; rows == 0 if absent
  std::vector<float> o_norm;                  // [S]
  kernels::MatrixView wo;                     // [n_embd][d_inner]
};

// How an architecture's converter writes the KDA tensors.
struct KdaForm {
  bool full_rank_gate = false;  // the output gate as one ssm_g (kimi-k3), else ssm_g_a + ssm_g_b
  bool flat_a = false;          // ssm_a as [n_head] (kimi-k3), else [1, n_head, 1, 1]
  // bailingmoe3: the decay projection as one ssm_f_a [d_inner][n_embd], the
  // output gate as one ssm_g_a [d_inner][n_embd], ssm_a as [1, n_head] holding
  // exp(A_log). Overrides the two above.
  bool bailing = false;
};

// The table entries (spec/tensor_table.h) of layer prefix p's ("blk.N.") KDA
// in the converter's order: ssm_conv1d_q/k/v ([d_conv, 1, d_inner, 1]),
// attn_q/k/v, ssm_f_a/_b, ssm_beta, ssm_a, ssm_dt.bias, the output gate,
// ssm_norm, attn_output; bound to w.
void kda_tensors(TensorTable& t, const std::string& p, const KdaShape& sh, int64_t n_embd, const KdaForm& form,
                 KdaWeights& w);
// After loading: w.a as -exp(A_log) whatever the form stored.
void finish_kda(KdaWeights& w, const KdaForm& form);

// s.xn -> s.out for s.n tokens (sequence s.seq[t], in position order per
// sequence), reading and advancing each sequence's state in layer il of s.seqs.
void kda_attention(const KdaWeights& w, const KdaShape& sh, int64_t il, ForwardState& s);

}  // namespace ns
