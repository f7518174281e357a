// glm4moe: GLM-4.5 / 4.5-Air / 4.6 / 4.7 shapes. GQA attention with Q/K/V
// biases, optional per-head Q/K norms (--glm-qk-norm), partial NEOX RoPE over
// --glm-rope-dim dims of each head; the first --glm-n-dense-lead layers dense,
// the rest sigmoid-routed experts with a selection bias and shared experts;
// then --glm-nextn-layers multi-token-prediction (NextN) blocks, which the
// engine and the reference skip. --n-layer counts the layers that run
// (num_hidden_layers); block_count adds the NextN blocks, as the converter
// writes it. Metadata as llama.cpp's converter (conversion/glm.py
// Glm4MoeModel, 2026-09-28) writes it; the tensors are
// engine/arch/glm4_moe.cpp's table.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct Glm4MoeFlags {
  uint32_t head_dim = 0;  // 0: n_embd / n_head
  uint32_t rope_dim = 0;  // 0: half the head (partial_rotary_factor 0.5)
  uint32_t n_ff_expert = 64;
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  uint32_t n_nextn = 1;
  bool qk_norm = true;
  float weights_scale = 2.5f;
  bool weights_norm = true;
};

class Glm4MoeArchitecture : public Architecture {
 public:
  std::string name() const override { return "glm4moe"; }

  void add_flags(CLI::App& app) override {
    Glm4MoeFlags& f = f_;
    const std::string g = "glm4moe";
    app.add_option("--glm-head-dim", f.head_dim, "glm4moe: attention head size (0: n_embd / n_head)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-rope-dim", f.rope_dim, "glm4moe: rotated dims per head (0: half the head)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-n-ff-expert", f.n_ff_expert, "glm4moe: hidden width of each routed (and shared) expert")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-n-shared", f.n_shared, "glm4moe: shared experts (always applied)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-n-dense-lead", f.n_dense_lead, "glm4moe: leading dense layers (FFN width --n-ff)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-nextn-layers", f.n_nextn,
                   "glm4moe: NextN (multi-token prediction) blocks after the last layer")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-qk-norm", f.qk_norm, "glm4moe: per-head Q/K RMS norms (true/false)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-weights-scale", f.weights_scale, "glm4moe: routed_scaling_factor")
        ->capture_default_str()
        ->group(g);
    app.add_option("--glm-weights-norm", f.weights_norm, "glm4moe: renormalize the chosen weights (true/false)")
        ->capture_default_str()
        ->group(g);
  }

  void validate(const Shape& s) const override {
    const Glm4MoeFlags& f = f_;
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "glm4moe: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head, --n-head-kv and --n-ctx must be positive");
    if (s.n_head % s.n_head_kv != 0) bad("--n-head must be a multiple of --n-head-kv");
    if (head_dim(s) == 0) bad("the head size must be positive (--glm-head-dim)");
    if (rope_dim(s) == 0 || rope_dim(s) % 2 || rope_dim(s) > head_dim(s))
      bad("--glm-rope-dim must be a positive even number up to the head size");
    if (f.n_dense_lead >= s.n_layer) bad("--glm-n-dense-lead must leave MoE layers (below --n-layer)");
    if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
    if (f.n_ff_expert == 0) bad("--glm-n-ff-expert must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const Glm4MoeFlags& f = f_;
    const std::string a = "glm4moe.";
    add_trunk_metadata(w, name(), s, s.n_layer + f.n_nextn, s.n_head_kv, BlockCountAt::first);
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::attention_key_length, val::u32(head_dim(s)));
    w.set(a + keys::attention_value_length, val::u32(head_dim(s)));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
    w.set(a + keys::rope_dimension_count, val::u32(rope_dim(s)));
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_feed_forward_length, val::u32(f.n_ff_expert));
    w.set(a + keys::expert_shared_count, val::u32(f.n_shared));
    w.set(a + keys::leading_dense_block_count, val::u32(f.n_dense_lead));
    w.set(a + keys::expert_gating_func, val::u32(2));  // sigmoid
    w.set(a + keys::expert_weights_scale, val::f32(f.weights_scale));
    w.set(a + keys::expert_weights_norm, val::boolean(f.weights_norm));
    if (f.n_nextn > 0) w.set(a + keys::nextn_predict_layers, val::u32(f.n_nextn));
  }

  // The per-head Q/K norms only with --glm-qk-norm.
  bool refine(const TensorSpec& t, TensorPlan&) const override {
    return f_.qk_norm || !(t.name.ends_with("attn_q_norm.weight") || t.name.ends_with("attn_k_norm.weight"));
  }

 private:
  uint32_t head_dim(const Shape& s) const { return f_.head_dim != 0 ? f_.head_dim : s.n_embd / s.n_head; }
  uint32_t rope_dim(const Shape& s) const { return f_.rope_dim != 0 ? f_.rope_dim : head_dim(s) / 2; }
  Glm4MoeFlags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<Glm4MoeArchitecture>());

}  // namespace
}  // namespace ns::make_model
