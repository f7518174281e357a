#include "tools/make_model/plan_builder.h"

namespace ns::make_model {
namespace {

// attn_k_b [nope, kv_lora, n_head] and attn_v_b [kv_lora, v_head, n_head]
// computed from the rows attn_kv_b [kv_lora, n_head * (nope + v_head)] would have.
void add_split_kv_b(PlanBuilder& p, const std::string& b, const Init& kv_b_init, const MlaDims& d) {
  const uint64_t nope = d.qk_nope, v_head = d.v_head, per_head = nope + v_head, kv_lora = d.kv_lora;
  const uint64_t kv_b_key = tensor_key(b + "attn_kv_b.weight");
  // k_b row (h, r) is column r of the head's nope rows of kv_b: each thread
  // keeps the last head's block so a head's rows cost one block.
  TensorPlan k_b{b + "attn_k_b.weight", {nope, kv_lora, d.n_head}, kv_b_init};
  k_b.fill = [=](uint64_t seed, uint64_t row, float* out, int64_t) {
    struct Block {
      uint64_t seed = 0, key = 0, head = ~0ull;
      std::vector<float> values;  // [nope][kv_lora]
    };
    thread_local Block block;
    const uint64_t h = row / kv_lora, r = row % kv_lora;
    if (block.seed != seed || block.key != kv_b_key || block.head != h) {
      block.values.resize(nope * kv_lora);
      for (uint64_t i = 0; i < nope; ++i)
        fill_row(seed, kv_b_key, h * per_head + i, kv_b_init, &block.values[i * kv_lora], static_cast<int64_t>(kv_lora));
      block.seed = seed;
      block.key = kv_b_key;
      block.head = h;
    }
    for (uint64_t i = 0; i < nope; ++i) out[i] = block.values[i * kv_lora + r];
  };
  TensorPlan v_b{b + "attn_v_b.weight", {kv_lora, v_head, d.n_head}, kv_b_init};
  v_b.fill = [=](uint64_t seed, uint64_t row, float* out, int64_t n) {
    const uint64_t h = row / v_head, j = row % v_head;
    fill_row(seed, kv_b_key, h * per_head + nope + j, kv_b_init, out, n);
  };
  p.add(std::move(k_b));
  p.add(std::move(v_b));
}

}  // namespace

void add_mla(PlanBuilder& p, const std::string& b, const MlaDims& d) {
  const uint64_t k_head = d.qk_nope + d.qk_rope, per_head = d.qk_nope + d.v_head;
  if (d.q_lora > 0) {
    p.add(b + "attn_q_a_norm.weight", {d.q_lora}, PlanBuilder::norm(), true);
    p.add(b + "attn_q_a.weight", {d.n_embd, d.q_lora}, PlanBuilder::proj(d.n_embd));
    p.add(b + "attn_q_b.weight", {d.q_lora, d.n_head * k_head}, PlanBuilder::proj(d.q_lora));
  } else {
    p.add(b + "attn_q.weight", {d.n_embd, d.n_head * k_head}, PlanBuilder::proj(d.n_embd));
  }
  p.add(b + "attn_kv_a_norm.weight", {d.kv_lora}, PlanBuilder::norm(), true);
  p.add(b + "attn_kv_a_mqa.weight", {d.n_embd, d.kv_lora + d.qk_rope}, PlanBuilder::proj(d.n_embd));
  const Init kv_b_init = PlanBuilder::proj(d.kv_lora);
  if (d.fused_kv_b)
    p.add(b + "attn_kv_b.weight", {d.kv_lora, d.n_head * per_head}, kv_b_init);
  else
    add_split_kv_b(p, b, kv_b_init, d);
  p.add(b + "attn_output.weight", {d.n_head * d.v_head, d.n_embd}, p.to_residual(d.n_head * d.v_head));
}

void add_deepseek_ffn(PlanBuilder& p, const std::string& b, const DeepseekFfnDims& d, bool dense) {
  const uint64_t n_embd = d.n_embd;
  if (dense) {
    p.add(b + "ffn_gate.weight", {n_embd, d.n_ff}, PlanBuilder::proj(n_embd));
    p.add(b + "ffn_up.weight", {n_embd, d.n_ff}, PlanBuilder::proj(n_embd));
    p.add(b + "ffn_down.weight", {d.n_ff, n_embd}, p.to_residual(d.n_ff));
    return;
  }
  p.add(b + "ffn_gate_inp.weight", {n_embd, d.n_expert}, PlanBuilder::proj(n_embd), true);
  // A small zero-sum selection bias: it moves choices, not the overall balance.
  p.add(b + "exp_probs_b.bias", {d.n_expert}, Init{Init::Kind::normal, 0.05f}, true);
  p.add(b + "ffn_gate_exps.weight", {n_embd, d.n_ff_expert, d.n_expert}, PlanBuilder::proj(n_embd), false, true);
  p.add(b + "ffn_up_exps.weight", {n_embd, d.n_ff_expert, d.n_expert}, PlanBuilder::proj(n_embd), false, true);
  p.add(b + "ffn_down_exps.weight", {d.n_ff_expert, n_embd, d.n_expert}, p.to_residual(d.n_ff_expert), false, true);
  if (d.n_shared > 0) {
    const uint64_t shexp = d.n_ff_expert * d.n_shared;
    p.add(b + "ffn_gate_shexp.weight", {n_embd, shexp}, PlanBuilder::proj(n_embd));
    p.add(b + "ffn_up_shexp.weight", {n_embd, shexp}, PlanBuilder::proj(n_embd));
    p.add(b + "ffn_down_shexp.weight", {shexp, n_embd}, p.to_residual(shexp));
  }
}

}  // namespace ns::make_model
