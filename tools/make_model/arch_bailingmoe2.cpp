// bailingmoe2: Ling 2.0 / Ring 2.0 shapes. GQA attention through the fused
// attn_qkv with per-head Q/K norms, partial NEOX RoPE over --ling-rope-dim
// dims of each head; the first --ling-n-dense-lead layers dense (--n-ff), the
// rest sigmoid-routed experts (--ling-n-ff-expert) with a selection bias,
// optionally group-limited (--ling-n-expert-group), plus shared experts; then
// --ling-nextn-layers multi-token-prediction (NextN) blocks, which the engine
// and the reference skip. --n-layer counts the layers that run; block_count
// adds the NextN blocks, as the converter writes it. The head size is
// --n-embd / --n-head (the reference's attn_qkv layout needs it so).
// Metadata as llama.cpp's converter (conversion/bailingmoe.py
// BailingMoeV2Model over TextModel, 2026-09-28) writes it; the tensors are
// engine/arch/bailingmoe2.cpp's table.
#include <CLI/CLI.hpp>

#include <string>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct BailingFlags {
  uint32_t rope_dim = 0;  // 0: half the head (partial_rotary_factor 0.5)
  uint32_t n_ff_expert = 64;
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  uint32_t n_nextn = 1;
  uint32_t n_groups = 0, n_groups_used = 0;
  float weights_scale = 2.5f;
  bool weights_norm = true;
};

class BailingMoe2Architecture : public Architecture {
 public:
  std::string name() const override { return "bailingmoe2"; }

  void add_flags(CLI::App& app) override {
    BailingFlags& f = f_;
    const std::string g = "bailingmoe2";
    add_arch_option(app, g, "--ling-rope-dim", f.rope_dim, "bailingmoe2: rotated dims per head (0: half the head)");
    add_arch_option(app, g, "--ling-n-ff-expert", f.n_ff_expert,
                    "bailingmoe2: hidden width of each routed (and shared) expert");
    add_arch_option(app, g, "--ling-n-shared", f.n_shared, "bailingmoe2: shared experts (always applied)");
    add_arch_option(app, g, "--ling-n-dense-lead", f.n_dense_lead,
                    "bailingmoe2: leading dense layers (FFN width --n-ff)");
    add_arch_option(app, g, "--ling-nextn-layers", f.n_nextn,
                    "bailingmoe2: NextN (multi-token prediction) blocks after the last layer");
    add_arch_option(app, g, "--ling-n-expert-group", f.n_groups,
                    "bailingmoe2: expert groups (0: no group-limited routing)");
    add_arch_option(app, g, "--ling-n-expert-group-used", f.n_groups_used,
                    "bailingmoe2: groups each token may use (fewer than --ling-n-expert-group)");
    add_arch_option(app, g, "--ling-weights-scale", f.weights_scale, "bailingmoe2: routed_scaling_factor");
    add_arch_option(app, g, "--ling-weights-norm", f.weights_norm,
                    "bailingmoe2: renormalize the chosen weights (true/false)");
  }

  void validate(const Shape& s) const override {
    const BailingFlags& f = f_;
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "bailingmoe2: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head, --n-head-kv and --n-ctx must be positive");
    if (s.n_head % s.n_head_kv != 0) bad("--n-head must be a multiple of --n-head-kv");
    if (s.n_embd % s.n_head != 0) bad("--n-embd must be a multiple of --n-head (the head size is their ratio)");
    if (rope_dim(s) == 0 || rope_dim(s) % 2 || rope_dim(s) > head_dim(s))
      bad("--ling-rope-dim must be a positive even number up to the head size");
    if (f.n_dense_lead >= s.n_layer) bad("--ling-n-dense-lead must leave MoE layers (below --n-layer)");
    if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
    if (f.n_ff_expert == 0) bad("--ling-n-ff-expert must be positive");
    if (f.n_groups > 1) {
      if (s.n_expert % f.n_groups) bad("--ling-n-expert-group must divide --n-expert");
      // The reference asserts fewer groups used than there are.
      if (f.n_groups_used == 0 || f.n_groups_used >= f.n_groups)
        bad("--ling-n-expert-group-used must be 1..--ling-n-expert-group - 1");
      if (f.n_groups_used * (s.n_expert / f.n_groups) < s.n_expert_used)
        bad("--ling-n-expert-group-used groups hold fewer experts than --n-expert-used");
    }
  }

  // TextModel's keys in its order, then BailingMoeV2Model's.
  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const BailingFlags& f = f_;
    const std::string a = "bailingmoe2.";
    add_trunk_metadata(w, name(), s, s.n_layer + f.n_nextn, s.n_head_kv, BlockCountAt::first);
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    if (f.n_groups > 1) {
      w.set(a + keys::expert_group_count, val::u32(f.n_groups));
      w.set(a + keys::expert_group_used_count, val::u32(f.n_groups_used));
    }
    w.set(a + keys::expert_gating_func, val::u32(2));  // sigmoid (score_function)
    w.set(a + keys::attention_key_length, val::u32(head_dim(s)));
    w.set(a + keys::attention_value_length, val::u32(head_dim(s)));
    w.set(a + keys::rope_dimension_count, val::u32(rope_dim(s)));
    w.set(a + keys::leading_dense_block_count, val::u32(f.n_dense_lead));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
    w.set(a + keys::expert_feed_forward_length, val::u32(f.n_ff_expert));
    // The converter's fallback when the config has no moe_shared_expert_intermediate_size.
    w.set(a + keys::expert_shared_feed_forward_length, val::u32(f.n_ff_expert * f.n_shared));
    w.set(a + keys::expert_weights_scale, val::f32(f.weights_scale));
    w.set(a + keys::expert_shared_count, val::u32(f.n_shared));
    w.set(a + keys::expert_weights_norm, val::boolean(f.weights_norm));
    if (f.n_nextn > 0) w.set(a + keys::nextn_predict_layers, val::u32(f.n_nextn));
  }

 private:
  static uint32_t head_dim(const Shape& s) { return s.n_embd / s.n_head; }
  uint32_t rope_dim(const Shape& s) const { return f_.rope_dim != 0 ? f_.rope_dim : head_dim(s) / 2; }
  BailingFlags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<BailingMoe2Architecture>());

}  // namespace
}  // namespace ns::make_model
