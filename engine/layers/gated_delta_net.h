// Gated DeltaNet: the linear-attention layer of qwen3next (Qwen3-Next) and
// qwen35moe (Qwen3.5 MoE), as llama.cpp's src/models/qwen3next.cpp and
// qwen35moe.cpp (2026-09-28) compute it. The delta rule of Kimi Delta
// Attention (delta_rule.h) with one decay per head instead of per key channel,
// and n_v value heads sharing n_k key heads. Per token x (the normed layer
// input), with head size S, key_dim = n_k S, value_dim = n_v S:
//
//   q | k | v = silu(causal_conv(attn_qkv x))   one depthwise conv over the
//                                              2 key_dim + value_dim channels
//   z         = attn_gate x                    [value_dim]
//   q, k      = l2_norm per key head
//   beta_h    = sigmoid(b_h)                   b, a: ssm_beta / ssm_alpha x (qwen35moe)
//   g_h       = ssm_a_h * softplus(a_h + ssm_dt_h)   or ssm_ba x (qwen3next: per key
//                                              head [b of its value heads | a of them])
//   o         = delta rule over value head h with key head h / (n_v / n_k)
//               (qwen3next) or h % n_k (qwen35moe), scalar decay exp(g_h)
//   out       = ssm_out (rms_norm(o_h) * ssm_norm * silu(z_h))
//
// ssm_a holds -exp(A_log) (the converter folds it). Metadata: ssm.state_size
// (S), ssm.group_count (n_k), ssm.time_step_rank (n_v), ssm.inner_size
// (value_dim), ssm.conv_kernel.
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

struct GdnShape {
  int64_t n_v_head = 0, n_k_head = 0, head_dim = 0, d_conv = 0;
  float rms_eps = 1e-6f;
  bool tiled_key_heads = false;   // qwen35moe's h % n_k; qwen3next's h / (n_v / n_k)
  bool split_beta_alpha = false;  // ssm_beta + ssm_alpha (qwen35moe) or one ssm_ba (qwen3next)

  int64_t key_dim() const { return n_k_head * head_dim; }
  int64_t value_dim() const { return n_v_head * head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Per sequence: the convolution's last d_conv - 1 inputs and the delta-rule states.
  int64_t conv_floats() const { return (d_conv - 1) * conv_dim(); }
  int64_t state_floats() const { return n_v_head * head_dim * head_dim; }
  // Per-token widths of the ForwardState buffers gdn_attention uses.
  int64_t q_width() const { return conv_dim(); }      // s.q: q | k | v, o over v
  int64_t k_width() const { return value_dim(); }     // s.k: z
  int64_t v_width() const { return value_dim(); }     // s.v: the gated output
  int64_t att_width() const { return 2 * n_v_head; }  // s.att: b | a rows, then beta | g
};

// From the ssm.* keys; throws ns::Error(bad_model) naming the key at fault.
// The head broadcast and the beta/alpha tensors are the architecture's to set
// (tiled_key_heads, split_beta_alpha: engine/arch/qwen_next.cpp).
GdnShape gdn_shape(const Hparams& hp);

struct GdnWeights {
  kernels::MatrixView qkv;          // [conv_dim][n_embd]
  kernels::MatrixView z;            // [value_dim][n_embd]
  std::vector<float> conv;          // [conv_dim][d_conv], oldest tap first
  kernels::MatrixView ba;           // [2 n_v][n_embd] (qwen3next)
  kernels::MatrixView beta, alpha;  // [n_v][n_embd] each (qwen35moe)
  std::vector<float> a;             // [n_v]: -exp(A_log)
  std::vector<float> dt_bias;       // [n_v]
  std::vector<float> norm;          // [S]
  kernels::MatrixView out;          // [n_embd][value_dim]
};

// The table entries (spec/tensor_table.h) of layer prefix p ("blk.N."), in
// the converter's order: attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a,
// ssm_beta + ssm_alpha or ssm_ba, ssm_norm, ssm_out; bound to w.
void gdn_tensors(TensorTable& t, const std::string& p, const GdnShape& sh, int64_t n_embd, GdnWeights& w);
// Throws ns::Error(bad_model) for a legacy qwen3next layer p with the
// interleaved ssm_in instead of attn_qkv + attn_gate (re-convert it).
void check_gdn_layout(const TensorLoader& t, const std::string& p);

// s.xn -> s.out for s.n tokens (sequence s.seq[t], in position order per
// sequence), reading and advancing each sequence's state in layer il of s.seqs.
void gdn_attention(const GdnWeights& w, const GdnShape& sh, int64_t il, ForwardState& s);

}  // namespace ns
