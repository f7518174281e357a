// What the kimi-linear and kimi-k3 generators share: the hybrid layer pattern
// (KDA layers with an MLA layer every --mla-every layers), its flags (one set,
// read by both architectures), its common metadata and the layer loop. Each
// arch_*.cpp says which of kimi-k3's parts it has (KimiParts) and writes its
// own keys.
#pragma once

#include <string>
#include <vector>

#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {

struct KimiHybridFlags {
  uint32_t mla_every = 4;      // layer il is MLA when (il + 1) % mla_every == 0 (Kimi Linear: 3 KDA : 1 MLA)
  uint32_t kda_head_dim = 32;
  uint32_t d_conv = 4;
  uint32_t kv_lora_rank = 64;
  uint32_t qk_rope = 16;
  uint32_t qk_nope = 32;
  uint32_t v_head = 32;
  uint32_t q_lora_rank = 0;    // Kimi Linear has none
  uint32_t n_ff_expert = 64;
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  float weights_scale = 2.446f;

  bool is_mla(uint32_t il) const { return (il + 1) % mla_every == 0; }
};

// The one instance both architectures read; add_kimi_hybrid_flags registers
// it on the first call (kimi-linear's flag names, kept for compatibility).
KimiHybridFlags& kimi_hybrid_flags();
void add_kimi_hybrid_flags(CLI::App& app);
// Throws ns::Error(invalid_input) prefixed with `arch`.
void validate_kimi_hybrid(const std::string& arch, const Shape& s);
// The keys both converters write under "<arch>." (context, sizes, KDA, MLA, MoE).
void add_kimi_hybrid_metadata(gguf::GgufWriter& w, const Shape& s, const std::string& arch);

// kimi-k3's parts beyond kimi-linear (all off: kimi-linear).
struct KimiParts {
  uint64_t attn_res_block = 0;   // attn_res_score/ffn_res_score per layer, output_res_score
  uint64_t expert_latent = 0;    // ffn_routed_down/_up, experts in this width
  bool routed_norm = false;      // ffn_routed_norm (latent only)
  bool attn_gate = false;        // MLA attn_gate
  bool full_rank_kda_gate = false;  // ssm_g instead of ssm_g_a/_b
  bool flat_ssm_a = false;       // ssm_a as [n_head] instead of [1, n_head, 1, 1]
};
std::vector<TensorPlan> kimi_hybrid_tensors(const Shape& s, const KimiParts& parts);

}  // namespace ns::make_model
