// kimi-k3: Kimi K3 shapes. The kimi-linear layer stack (kimi_hybrid.h, its
// flags apply) with kimi-k3's parts, each switchable: cross-layer attention
// residuals (--attn-res-block, 0: off), latent MoE (--expert-latent, 0: off;
// --routed-norm), the MLA output gate (--attn-gate), the situ betas, the KDA
// lower-bound decay gate (--kda-lower-bound, 0: off). The tensors are
// engine/arch/kimi_k3.cpp's table (always the full-rank KDA gate ssm_g and
// ssm_a as a plain [n_head] tensor; the *_res_score vectors as the fused
// norm * proj). Metadata as llama.cpp's converter (conversion/kimi_k3.py,
// 2026-09-28) writes it: key_length kv_lora + rope and value_length kv_lora
// (the MQA view), expert_weights_norm from moe_renormalize.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/kimi_hybrid.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct KimiK3Flags {
  uint32_t attn_res_block = 2;  // Kimi K3's checkpoint spacing is a config value; 0: off
  uint32_t expert_latent = 0;   // routed experts' width; 0: n_embd (no latent MoE)
  bool routed_norm = true;
  bool attn_gate = true;
  float situ_beta = 4.0f;
  float situ_linear_beta = 8.0f;  // <= 0: the up branch as is
  float kda_lower_bound = -5.0f;  // 0: the softplus decay gate (the key is not written)
  bool weights_norm = true;       // moe_renormalize
};

class KimiK3Architecture : public Architecture {
 public:
  std::string name() const override { return "kimi-k3"; }

  void add_flags(CLI::App& app) override {
    add_kimi_hybrid_flags(app);
    KimiK3Flags& f = f_;
    const std::string g = "kimi-k3";
    add_arch_option(app, g, "--attn-res-block", f.attn_res_block,
                    "kimi-k3: attention residual checkpoint every N layers (0: off)");
    add_arch_option(app, g, "--expert-latent", f.expert_latent, "kimi-k3: routed experts' latent width (0: off)");
    add_arch_option(app, g, "--routed-norm", f.routed_norm, "kimi-k3: ffn_routed_norm on the latent sum (true/false)");
    add_arch_option(app, g, "--attn-gate", f.attn_gate, "kimi-k3: MLA sigmoid output gate attn_gate (true/false)");
    add_arch_option(app, g, "--situ-beta", f.situ_beta, "kimi-k3: situ activation beta (> 0)");
    add_arch_option(app, g, "--situ-linear-beta", f.situ_linear_beta, "kimi-k3: situ up-branch beta (<= 0: off)");
    add_arch_option(app, g, "--kda-lower-bound", f.kda_lower_bound,
                    "kimi-k3: KDA decay gate lower bound (< 0; 0: off)");
    add_arch_option(app, g, "--k3-expert-weights-norm", f.weights_norm,
                    "kimi-k3: renormalize the chosen experts' weights");
  }

  void validate(const Shape& s) const override {
    validate_kimi_hybrid(name(), s);
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "kimi-k3: " + m); };
    if (!(f_.situ_beta > 0)) bad("--situ-beta must be positive");
    if (f_.kda_lower_bound > 0) bad("--kda-lower-bound must be negative (0: off)");
    if (f_.attn_res_block > s.n_layer) bad("--attn-res-block exceeds --n-layer");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    add_kimi_hybrid_metadata(w, s, name());
    const KimiHybridFlags& h = kimi_hybrid_flags();
    const std::string a = name() + ".";
    w.set(a + keys::attention_value_length, val::u32(h.mla.kv_lora_rank));
    if (f_.kda_lower_bound < 0) w.set(a + keys::kda_gate_lower_bound, val::f32(f_.kda_lower_bound));
    w.set(a + keys::expert_weights_norm, val::boolean(f_.weights_norm));
    if (f_.expert_latent > 0) w.set(a + keys::expert_latent_length, val::u32(f_.expert_latent));
    w.set(a + keys::activation_situ_beta, val::f32(f_.situ_beta));
    w.set(a + keys::activation_situ_linear_beta, val::f32(f_.situ_linear_beta));
    w.set(a + keys::attn_res_block_size, val::u32(f_.attn_res_block));
  }

  // The table's optional parts as the flags say: attn_gate, ffn_routed_norm.
  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    if (t.name.ends_with("attn_gate.weight")) return f_.attn_gate;
    if (t.name.ends_with("ffn_routed_norm.weight")) return f_.routed_norm;
    refine_kimi_hybrid(t, plan);
    return true;
  }

 private:
  KimiK3Flags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<KimiK3Architecture>());

}  // namespace
}  // namespace ns::make_model
