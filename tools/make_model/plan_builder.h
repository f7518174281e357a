// Building an architecture's tensor list: the initial scales every generated
// model uses (~unit outputs for unit inputs, residual writers scaled by
// 1/sqrt(2 n_layer), norms near 1) and the blocks several architectures share
// (DeepSeek-style MLA attention, DeepSeek-style FFN), so each arch_*.cpp lists
// only what is its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/make_model/architecture.h"

namespace ns::make_model {

class PlanBuilder {
 public:
  explicit PlanBuilder(uint32_t n_layer) : residual_(1.0f / std::sqrt(2.0f * float(n_layer))) {}

  static Init proj(uint64_t fan_in) { return Init{Init::Kind::normal, 1.0f / std::sqrt(float(fan_in))}; }
  Init to_residual(uint64_t fan_in) const { return Init{Init::Kind::normal, residual_ / std::sqrt(float(fan_in))}; }
  static Init norm() { return Init{Init::Kind::norm, 0.05f}; }
  // The sigmoid router's selection bias exp_probs_b for n_used of n_expert
  // (plan_builder.cpp: sized by the expert load spread it causes).
  static Init selection_bias(uint64_t n_expert, uint64_t n_used);

  void add(std::string name, std::vector<uint64_t> dims, Init init, bool always_f32 = false, bool expert = false) {
    plans_.push_back({std::move(name), std::move(dims), init, always_f32, expert});
  }
  void add(TensorPlan plan) { plans_.push_back(std::move(plan)); }
  std::vector<TensorPlan> take() { return std::move(plans_); }

 private:
  float residual_;
  std::vector<TensorPlan> plans_;
};

// DeepSeek-style multi-head latent attention of block prefix b ("blk.N.").
struct MlaDims {
  uint64_t n_embd = 0, n_head = 0;
  uint64_t q_lora = 0;        // 0: one attn_q projection
  uint64_t kv_lora = 0, qk_rope = 0, qk_nope = 0, v_head = 0;
  bool fused_kv_b = false;    // attn_kv_b instead of attn_k_b + attn_v_b
  bool output_gate = false;   // attn_gate [n_embd, n_head * v_head] (kimi-k3)
};
// attn_q or attn_q_a(_norm)/attn_q_b, attn_kv_a_norm, attn_kv_a_mqa, attn_kv_b
// or attn_k_b + attn_v_b (holding exactly the values the fused attn_kv_b would
// have for the same seed), attn_gate if asked, attn_output.
void add_mla(PlanBuilder& p, const std::string& b, const MlaDims& d);

// DeepSeek-style FFN of block prefix b: dense (ffn_gate/up/down of n_ff) when
// `dense`, else router, selection bias (PlanBuilder::selection_bias for
// n_expert_used of n_expert), routed experts and n_shared shared experts.
// With `latent` > 0 (kimi-k3's latent MoE) the routed experts run in that
// width between ffn_routed_down and ffn_routed_up (ffn_routed_norm if
// routed_norm); the router and shared experts stay n_embd wide.
struct DeepseekFfnDims {
  uint64_t n_embd = 0, n_ff = 0, n_expert = 0, n_ff_expert = 0, n_shared = 0, n_expert_used = 0;
  uint64_t latent = 0;
  bool routed_norm = false;
};
void add_deepseek_ffn(PlanBuilder& p, const std::string& b, const DeepseekFfnDims& d, bool dense);

// Kimi Delta Attention of block prefix b (kimi-linear, kimi-k3), as the
// converters write it: conv weights [d_conv, 1, d_inner, 1], ssm_a holding
// -exp(A_log) ([1, n_head, 1, 1], or [n_head] with flat_a), the output gate as
// ssm_g_a/ssm_g_b or (full_rank_gate) one ssm_g.
struct KdaDims {
  uint64_t n_embd = 0, n_head = 0, head_dim = 0, d_conv = 0;
  bool full_rank_gate = false;
  bool flat_a = false;
};
void add_kda(PlanBuilder& p, const std::string& b, const KdaDims& d);

}  // namespace ns::make_model
