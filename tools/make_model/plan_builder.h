// Building an architecture's tensor list from its table (table_plans.h): the
// initial scales every generated model uses (~unit outputs for unit inputs,
// residual writers scaled by 1/sqrt(2 n_layer), norms near 1) and the
// refinements of the tables several architectures share (MLA's split
// attn_k_b/attn_v_b, the delta-rule decays), so each arch_*.cpp refines only
// what is its own.
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

// MLA attention's sizes (deepseek2; the MLA layers of kimi-linear, kimi-k3
// and bailingmoe3, whose flags set them): the query's low rank (0: one attn_q
// projection), the cached latent, a head's rotary and non-rotary key dims and
// its value dims. Each architecture's flags give the defaults they differ in.
struct MlaSizes {
  uint32_t q_lora_rank = 0;
  uint32_t kv_lora_rank = 64;
  uint32_t qk_rope = 16;
  uint32_t qk_nope = 32;
  uint32_t v_head = 32;

  // attention.key_length of the MQA view (the latent and the rotary part, one
  // KV head) and of a head's own keys (key_length_mla, or key_length of the
  // fused layout).
  uint32_t mqa_key_length() const { return kv_lora_rank + qk_rope; }
  uint32_t head_key_length() const { return qk_nope + qk_rope; }
};

// The generator's refinements (Architecture::refine) of tables several
// architectures share; each returns whether it handled `spec`.
//
// MLA's split attn_k_b [nope, kv_lora, n_head] and attn_v_b [kv_lora, v_head,
// n_head]: filled with exactly the values the fused attn_kv_b [kv_lora,
// n_head * (nope + v_head)] would have for the same seed (k_b is its k part
// transposed), so a file of either layout is the same model.
bool refine_split_kv_b(const TensorSpec& spec, TensorPlan& plan, const MlaSizes& mla);
// The MLA keys of a split-layout file as the kimi-linear, kimi-k3 and bailingmoe3 converters write them, in
// their order, under `prefix` ("<arch>."): q_lora_rank (when set), kv_lora_rank, the rotary dims, the MQA
// key_length, key_length_mla and value_length_mla (deepseek2's converter writes its own set, value_length too).
void add_split_mla_metadata(gguf::GgufWriter& w, const std::string& prefix, const MlaSizes& mla);
// A delta-rule layer's decay tensors (Gated DeltaNet, KDA): ssm_dt.bias
// ~N(0, 0.5), ssm_a = -exp(A_log) < 0, one per head: -1, -1.5, -2, -2.5, -1, ...
// (exact, seed-independent) whatever its shape.
bool refine_decay(const TensorSpec& spec, TensorPlan& plan);

}  // namespace ns::make_model
