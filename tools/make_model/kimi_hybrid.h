// What the kimi-linear and kimi-k3 generators share: the hybrid layer pattern
// (KDA layers with an MLA layer every --mla-every layers), its flags (one set,
// read by both architectures), its common metadata and the refinements of
// the engine's shared table (engine/arch/kimi_hybrid.h). Each arch_*.cpp
// writes its own keys, which switch kimi-k3's parts on and off.
#pragma once

#include <string>
#include <vector>

#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {

struct KimiHybridFlags {
  uint32_t mla_every = 4;  // layer il is MLA when (il + 1) % mla_every == 0 (Kimi Linear: 3 KDA : 1 MLA)
  uint32_t kda_head_dim = 32;
  uint32_t d_conv = 4;
  MlaSizes mla;  // Kimi Linear has no q_lora
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

// The refinements of the shared table (engine/arch/kimi_hybrid.h): MLA's
// split attn_k_b/attn_v_b, the KDA decays (plan_builder.h).
void refine_kimi_hybrid(const TensorSpec& spec, TensorPlan& plan);

}  // namespace ns::make_model
