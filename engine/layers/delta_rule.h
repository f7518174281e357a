// The pieces every delta-rule linear-attention layer shares (Kimi Delta
// Attention: kda.h; Gated DeltaNet: gated_delta_net.h), computed as the
// reference's CPU backend does (ggml_ssm_conv, its l2 norm, and its fused
// gated-delta-net op, ggml/src/ggml-cpu/ops.cpp, 2026-09-28):
//
//   causal_conv_silu   depthwise causal convolution over the channels of the
//                      batch's rows, each sequence continuing from its last
//                      d_conv - 1 inputs (kept in SequenceState::conv), then SiLU
//   l2_norm            x / sqrt(sum x^2 + eps), as an RMS norm with eps / n scaled by 1/sqrt(n)
//   delta_rule         per value head h and token, with S the head size:
//                        M      = exp(g) M        g: one log-decay per key channel (KDA)
//                                                 or one for the whole head (Gated DeltaNet)
//                        delta  = beta (v - M^T k)
//                        M     += k delta^T
//                        o      = M^T q / sqrt(S)   (written over v)
//                      M is kept transposed (row j = value channel j over the
//                      key channels) in SequenceState::recurrent, F32, float sums.
//
// Tokens are processed in batch order; tokens of several sequences in one
// batch each use their own state, so batched = alone holds exactly.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/state/forward_state.h"

namespace ns {

// The gates' scalar functions, as the reference's unary ops compute them.
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// The causal convolution of `channels` channels of s.n rows spaced `stride`
// floats apart (x[t * stride + c]), in place, then SiLU. w is [channel][taps],
// oldest tap first; the saved inputs are [channel][taps - 1] at
// s.seqs->conv(il, seq) + state_offset.
void causal_conv_silu(float* x, int64_t stride, int64_t channels, const float* w, int64_t taps, int64_t state_offset,
                      int64_t il, ForwardState& s);

// In place, as the reference's delta-net layers normalize q and k.
void l2_norm(float* x, int64_t n, float eps);

// Where the delta rule finds its inputs. Rows are per token: q and k rows
// hold n_k_head heads of head_dim, v rows n_head heads; g holds per token
// n_head * head_dim values (per_channel_decay) or n_head; beta n_head.
struct DeltaRuleIo {
  int64_t n_head = 0, n_k_head = 0, head_dim = 0;
  // Value head h reads key head h / (n_head / n_k_head) (grouped: Qwen3-Next's
  // repeat-interleave) or h % n_k_head (tiled: Qwen3.5's broadcast).
  bool tiled_key_heads = false;
  const float* q = nullptr;
  const float* k = nullptr;
  int64_t qk_stride = 0;  // floats between tokens' q (and k) rows
  float* v = nullptr;     // in: values; out: o
  int64_t v_stride = 0;
  const float* g = nullptr;  // log-decay (<= 0)
  bool per_channel_decay = false;
  const float* beta = nullptr;
  int64_t key_head(int64_t h) const { return tiled_key_heads ? h % n_k_head : h / (n_head / n_k_head); }
};

// Per-thread scratch delta_rule needs in s.q16, in uint16s (two rows of head_dim floats).
inline int64_t delta_rule_scratch_u16(int64_t head_dim) { return 4 * head_dim + 2; }

// Runs the recurrence over the batch's tokens for every head of layer il's
// state (heads spread over the threads, each thread's scratch in s.q16).
void delta_rule(const DeltaRuleIo& io, int64_t il, ForwardState& s);

}  // namespace ns
