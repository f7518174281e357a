// bailingmoe3: Ling 3.0 / Ring 3.0 shapes. KDA layers with an MLA layer
// closing each group of --ling3-group layers (and every layer after the last
// whole group, as the converter's is_full_attention has it); leading dense
// layers (--n-ff), then sigmoid-routed experts (--ling3-n-ff-expert) with a
// selection bias, plus one shared-expert FFN (--ling3-n-ff-shexp); then
// --ling3-nextn-layers NextN blocks (MLA), which the engine and the reference
// skip. --n-layer counts the layers that run; block_count adds the NextN
// blocks. The KDA head size is --ling3-kda-head-dim (the checkpoint's
// head_dim); MLA takes the --ling3-* latent sizes (--ling3-q-lora-rank 0:
// attn_q, as Ling-3.0-flash; Ling-3.0-tiny has a q_lora). Metadata as
// llama.cpp's converter (conversion/bailingmoe3.py BailingMoeV3Model over
// TextModel, 2026-09-28) writes it; the tensors are engine/arch/bailingmoe3.cpp's
// table (ssm_a holding exp(A_log) as [1, n_head], positive here).
// --ling3-swiglu-limit writes one SwiGLU clamp for every FFN of every block.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "engine/spec/metadata_keys.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {
namespace {

struct Ling3Flags {
  uint32_t group = 4;  // layer_group_size: layers il with (il + 1) % group == 0 are MLA
  uint32_t kda_head_dim = 32;
  uint32_t d_conv = 4;
  float lower_bound = -5.0f;  // kda_lower_bound
  MlaSizes mla;
  uint32_t n_ff_expert = 64;
  uint32_t n_ff_shexp = 64;
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  uint32_t n_nextn = 1;
  float weights_scale = 2.5f;
  bool weights_norm = true;
  float swiglu_limit = 0.0f;  // expert_swiglu_limit_list / share_expert_swiglu_limit_list, every block; 0: none

  // The converter's is_full_attention for the blocks that run (NextN blocks are MLA).
  bool is_mla(uint32_t il, uint32_t n_layer) const {
    return il >= n_layer || (il + 1) % group == 0 || il >= n_layer / group * group;
  }
};

class BailingMoe3Architecture : public Architecture {
 public:
  std::string name() const override { return "bailingmoe3"; }

  void add_flags(CLI::App& app) override {
    Ling3Flags& f = f_;
    const std::string g = "bailingmoe3";
    add_arch_option(app, g, "--ling3-group", f.group, "bailingmoe3: layer_group_size (the last layer of each is MLA)");
    add_arch_option(app, g, "--ling3-kda-head-dim", f.kda_head_dim, "bailingmoe3: KDA head size (key = value)");
    add_arch_option(app, g, "--ling3-conv-kernel", f.d_conv, "bailingmoe3: KDA short convolution taps");
    add_arch_option(app, g, "--ling3-lower-bound", f.lower_bound, "bailingmoe3: KDA decay gate lower bound (< 0)");
    add_arch_option(app, g, "--ling3-kv-lora-rank", f.mla.kv_lora_rank, "bailingmoe3: MLA latent width");
    add_arch_option(app, g, "--ling3-qk-rope-dim", f.mla.qk_rope, "bailingmoe3: MLA rotated dims per head");
    add_arch_option(app, g, "--ling3-qk-nope-dim", f.mla.qk_nope, "bailingmoe3: MLA nope dims per head");
    add_arch_option(app, g, "--ling3-v-head-dim", f.mla.v_head, "bailingmoe3: MLA value dims per head");
    add_arch_option(app, g, "--ling3-q-lora-rank", f.mla.q_lora_rank,
                    "bailingmoe3: MLA query low-rank width (0: one attn_q)");
    add_arch_option(app, g, "--ling3-n-ff-expert", f.n_ff_expert, "bailingmoe3: hidden width of each routed expert");
    add_arch_option(app, g, "--ling3-n-ff-shexp", f.n_ff_shexp, "bailingmoe3: hidden width of the shared-expert FFN");
    add_arch_option(app, g, "--ling3-n-shared", f.n_shared, "bailingmoe3: num_shared_experts (metadata)");
    add_arch_option(app, g, "--ling3-n-dense-lead", f.n_dense_lead,
                    "bailingmoe3: leading dense layers (FFN width --n-ff)");
    add_arch_option(app, g, "--ling3-nextn-layers", f.n_nextn,
                    "bailingmoe3: NextN (multi-token prediction) blocks after the last layer");
    add_arch_option(app, g, "--ling3-weights-scale", f.weights_scale, "bailingmoe3: routed_scaling_factor");
    add_arch_option(app, g, "--ling3-weights-norm", f.weights_norm,
                    "bailingmoe3: renormalize the chosen weights (true/false)");
    add_arch_option(app, g, "--ling3-swiglu-limit", f.swiglu_limit,
                    "bailingmoe3: SwiGLU clamp of every FFN, each block (0: none written)");
  }

  void validate(const Shape& s) const override {
    const Ling3Flags& f = f_;
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "bailingmoe3: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head and --n-ctx must be positive");
    if (f.group == 0) bad("--ling3-group must be positive (1: every layer MLA)");
    if (f.kda_head_dim == 0 || f.d_conv < 2) bad("--ling3-kda-head-dim must be positive, --ling3-conv-kernel >= 2");
    if (!(f.lower_bound < 0)) bad("--ling3-lower-bound must be negative");
    if (f.mla.kv_lora_rank == 0 || f.mla.qk_nope == 0 || f.mla.v_head == 0 || f.mla.qk_rope == 0 || f.mla.qk_rope % 2)
      bad("--ling3-kv-lora-rank, --ling3-qk-nope-dim, --ling3-v-head-dim must be positive, --ling3-qk-rope-dim "
          "positive and even");
    if (f.n_dense_lead >= s.n_layer) bad("--ling3-n-dense-lead must leave MoE layers (below --n-layer)");
    if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
    if (f.n_ff_expert == 0 || f.n_ff_shexp == 0) bad("--ling3-n-ff-expert and --ling3-n-ff-shexp must be positive");
    if (f.swiglu_limit < 0) bad("--ling3-swiglu-limit must be positive (0: none)");
  }

  // TextModel's keys (head_count_kv 1, then one per block), then BailingMoeV3Model's.
  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const Ling3Flags& f = f_;
    const std::string a = "bailingmoe3.";
    const uint32_t blocks = s.n_layer + f.n_nextn;
    add_trunk_metadata(w, name(), s, blocks, 1, BlockCountAt::first);
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::expert_gating_func, val::u32(2));  // sigmoid (score_function)
    std::vector<int32_t> kv;
    for (uint32_t il = 0; il < blocks; ++il) kv.push_back(f.is_mla(il, s.n_layer) ? 1 : 0);
    w.set(a + keys::attention_head_count_kv, val::i32_array(kv));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
    w.set(a + keys::ssm_conv_kernel, val::u32(f.d_conv));
    w.set(a + keys::kda_head_dim, val::u32(f.kda_head_dim));
    w.set(a + keys::kda_safe_gate, val::boolean(true));
    w.set(a + keys::kda_gate_lower_bound, val::f32(f.lower_bound));
    add_split_mla_metadata(w, a, f.mla);
    w.set(a + keys::expert_feed_forward_length, val::u32(f.n_ff_expert));
    w.set(a + keys::expert_shared_feed_forward_length, val::u32(f.n_ff_shexp));
    w.set(a + keys::expert_shared_count, val::u32(f.n_shared));
    w.set(a + keys::leading_dense_block_count, val::u32(f.n_dense_lead));
    w.set(a + keys::expert_weights_scale, val::f32(f.weights_scale));
    w.set(a + keys::expert_weights_norm, val::boolean(f.weights_norm));
    if (f.swiglu_limit > 0) {
      w.set(a + keys::swiglu_clamp_exp, val::f32_array(std::vector<float>(blocks, f.swiglu_limit)));
      w.set(a + keys::swiglu_clamp_shexp, val::f32_array(std::vector<float>(blocks, f.swiglu_limit)));
    }
    if (f.n_nextn > 0) w.set(a + keys::nextn_predict_layers, val::u32(f.n_nextn));
  }

  // MLA's split attn_k_b/attn_v_b; the KDA decays, ssm_a positive (exp(A_log)).
  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    if (refine_split_kv_b(t, plan, f_.mla)) return true;
    if (t.name.ends_with("ssm_a")) {
      plan.init = Init{Init::Kind::normal, 1.0f};
      plan.fill = [](uint64_t, uint64_t row, float* out, int64_t n) {
        for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.5f * float((row * uint64_t(n) + uint64_t(i)) % 4);
      };
      return true;
    }
    refine_decay(t, plan);
    return true;
  }

 private:
  Ling3Flags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<BailingMoe3Architecture>());

}  // namespace
}  // namespace ns::make_model
