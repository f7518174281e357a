#include "tools/make_model/plan_builder.h"

#include <algorithm>

#include "engine/spec/metadata_keys.h"

namespace ns::make_model {

// Sized by what it does to the expert load. A token takes the n_used experts
// of highest sigmoid(logit) + bias, its logits ~N(0, 1) (a unit-RMS input
// through proj(n_embd) rows); the choice is made at the logit z above which a
// share n_used / n_expert of them lies, where the sigmoid's slope is
// s(z)(1 - s(z)). A bias b shifts its expert's logits by b / slope there and
// multiplies its load by ~exp(h b / slope), h = phi(z) / P(N(0,1) > z) the
// normal tail's hazard. A bias of deviation sigma thus spreads the experts'
// loads by a factor exp(c) per deviation, c = h sigma / slope: the same sigma
// unbalances a top-8-of-384 router (z = 2.04, c = 24 sigma) four times more
// than a top-4-of-16 one (z = 0.67, c = 5.7 sigma). A trained model's bias is
// fitted to balance the load; a random one can only unbalance it, so it is
// kept at c = 0.3, capped at 0.05.
// Measured (ns_bench_batch spread, 64 random tokens, kimi-k3 with 384 experts,
// top-8, widths 512 and 7168, 4 MoE layers; uniform routing touches 284):
// sigma 0.05 (c = 1.18) 201-211 experts per layer (71-74 %), 0.02 (c = 0.47)
// 258 (91 %), 0.01 (c = 0.24) 273 (96 %), no bias 276-277 (97 %); the
// DeepSeek-V2-Lite bench shape (64 experts, top-6, width 2048; uniform 63.9):
// 57-60 at 0.05 (c = 0.54), 63-64 at this rule's 0.028.
// The cap is the former fixed N(0, 0.05): top-quarter shapes (4 of 16, 2 of 8;
// c = 0.28 at 0.05) keep it, and with it the reference goldens' files.
// std::erfc and std::exp in double, once per file: a libm an ulp away changes
// the float only on a rounding boundary.
Init PlanBuilder::selection_bias(uint64_t n_expert, uint64_t n_used) {
  constexpr double kLoadSpread = 0.3, kCap = 0.05;
  const double share = n_expert > 0 ? double(n_used) / double(n_expert) : 1.0;
  if (share <= 0.0 || share >= 1.0) return Init{Init::Kind::normal, float(kCap)};
  auto tail = [](double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); };  // P(N(0,1) > z)
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) (tail(0.5 * (lo + hi)) > share ? lo : hi) = 0.5 * (lo + hi);
  const double z = 0.5 * (lo + hi);
  const double hazard = std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846) / share;
  const double s = 1.0 / (1.0 + std::exp(-z)), slope = s * (1.0 - s);
  return Init{Init::Kind::normal, float(std::min(kCap, kLoadSpread * slope / hazard))};
}

bool refine_split_kv_b(const TensorSpec& spec, TensorPlan& plan, const MlaSizes& mla) {
  const std::string_view name = spec.name;
  const bool k = name.ends_with("attn_k_b.weight"), v = name.ends_with("attn_v_b.weight");
  if (!k && !v) return false;
  const uint64_t nope = mla.qk_nope, v_head = mla.v_head, per_head = nope + v_head;
  const uint64_t kv_lora = k ? spec.dims[1] : spec.dims[0];
  const std::string b(name.substr(0, name.size() - std::string_view("attn_k_b.weight").size()));
  const uint64_t kv_b_key = tensor_key(b + "attn_kv_b.weight");
  const Init kv_b_init = PlanBuilder::proj(kv_lora);
  plan.init = kv_b_init;
  if (v) {
    plan.fill = [=](uint64_t seed, uint64_t row, float* out, int64_t n) {
      const uint64_t h = row / v_head, j = row % v_head;
      fill_row(seed, kv_b_key, h * per_head + nope + j, kv_b_init, out, n);
    };
    return true;
  }
  // k_b row (h, r) is column r of the head's nope rows of kv_b: each thread
  // keeps the last head's block so a head's rows cost one block.
  plan.fill = [=](uint64_t seed, uint64_t row, float* out, int64_t) {
    struct Block {
      uint64_t seed = 0, key = 0, head = ~0ull;
      std::vector<float> values;  // [nope][kv_lora]
    };
    thread_local Block block;
    const uint64_t h = row / kv_lora, r = row % kv_lora;
    if (block.seed != seed || block.key != kv_b_key || block.head != h) {
      block.values.resize(nope * kv_lora);
      for (uint64_t i = 0; i < nope; ++i)
        fill_row(seed, kv_b_key, h * per_head + i, kv_b_init, &block.values[i * kv_lora],
                 static_cast<int64_t>(kv_lora));
      block.seed = seed;
      block.key = kv_b_key;
      block.head = h;
    }
    for (uint64_t i = 0; i < nope; ++i) out[i] = block.values[i * kv_lora + r];
  };
  return true;
}

bool refine_decay(const TensorSpec& spec, TensorPlan& plan) {
  if (spec.name.ends_with("ssm_dt.bias")) {
    plan.init = Init{Init::Kind::normal, 0.5f};
    return true;
  }
  if (!spec.name.ends_with("ssm_a")) return false;
  plan.init = Init{Init::Kind::normal, 1.0f};
  // Value k of the tensor, whether its rows hold one head ([1, n_head, 1, 1]) or all ([n_head]).
  plan.fill = [](uint64_t, uint64_t row, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = -(1.0f + 0.5f * float((row * uint64_t(n) + uint64_t(i)) % 4));
  };
  return true;
}

void add_split_mla_metadata(gguf::GgufWriter& w, const std::string& prefix, const MlaSizes& mla) {
  using namespace gguf;
  if (mla.q_lora_rank > 0) w.set(prefix + keys::attention_q_lora_rank, val::u32(mla.q_lora_rank));
  w.set(prefix + keys::attention_kv_lora_rank, val::u32(mla.kv_lora_rank));
  w.set(prefix + keys::rope_dimension_count, val::u32(mla.qk_rope));
  w.set(prefix + keys::attention_key_length, val::u32(mla.mqa_key_length()));
  w.set(prefix + keys::attention_key_length_mla, val::u32(mla.head_key_length()));
  w.set(prefix + keys::attention_value_length_mla, val::u32(mla.v_head));
}

}  // namespace ns::make_model
