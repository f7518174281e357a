// minimax-m3: MiniMax-M3 shapes. minimax-m2's GQA attention but with per-head
// Q/K RMS norms ([head_dim], shared by the heads), partial NEOX RoPE over
// --mm3-rope-dim dims of each --mm3-head-dim head; --mm3-n-dense-lead dense
// layers, then sigmoid-routed experts with a selection bias plus
// --mm3-n-shared shared experts, every FFN --n-ff wide (the converter writes
// one intermediate_size for both); MiniMax sparse attention in the MoE layers
// (one indexer head per KV head, --msa-* sizes). Metadata as llama.cpp's
// converter (conversion/minimax.py MiniMaxM3Model over MiniMaxM2Model over
// TextModel, 2026-09-28) writes it; its indexer tensors are kept F32 as that
// converter forces them; the tensors are engine/arch/minimax_m3.cpp's table.
#include <CLI/CLI.hpp>

#include <string>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct MinimaxM3Flags {
  uint32_t head_dim = 0;  // 0: n_embd / n_head
  uint32_t rope_dim = 0;  // 0: half the head
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  float weights_scale = 2.5f;  // routed_scaling_factor
  uint32_t msa_head_dim = 32, msa_top_k = 4, msa_block = 4, msa_local = 1;
};

class MinimaxM3Architecture : public Architecture {
 public:
  std::string name() const override { return "minimax-m3"; }

  void add_flags(CLI::App& app) override {
    const std::string g = "minimax-m3";
    add_arch_option(app, g, "--mm3-head-dim", f_.head_dim, "minimax-m3: attention head size (0: n_embd / n_head)");
    add_arch_option(app, g, "--mm3-rope-dim", f_.rope_dim, "minimax-m3: rotated dims per head (0: half the head)");
    add_arch_option(app, g, "--mm3-n-shared", f_.n_shared, "minimax-m3: shared experts (always applied)");
    add_arch_option(app, g, "--mm3-n-dense-lead", f_.n_dense_lead, "minimax-m3: leading dense layers");
    add_arch_option(app, g, "--mm3-weights-scale", f_.weights_scale, "minimax-m3: routed weights multiplier");
    add_arch_option(app, g, "--msa-head-dim", f_.msa_head_dim, "minimax-m3: sparse attention indexer key length");
    add_arch_option(app, g, "--msa-top-k", f_.msa_top_k, "minimax-m3: blocks of past positions each query keeps");
    add_arch_option(app, g, "--msa-block-size", f_.msa_block, "minimax-m3: positions per indexer block");
    add_arch_option(app, g, "--msa-local-blocks", f_.msa_local,
                    "minimax-m3: blocks always kept, ending at the query's own");
  }

  void validate(const Shape& s) const override {
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "minimax-m3: " + m); };
    validate_moe_shape(s, name());
    if (head_dim(s) == 0) bad("the head size must be positive (--mm3-head-dim)");
    if (rope_dim(s) == 0 || rope_dim(s) % 2 || rope_dim(s) > head_dim(s))
      bad("--mm3-rope-dim must be a positive even number up to the head size");
    if (f_.n_dense_lead > s.n_layer) bad("--mm3-n-dense-lead exceeds --n-layer");
    if (f_.msa_head_dim == 0 || f_.msa_head_dim % 2 || f_.msa_head_dim < rope_dim(s))
      bad("--msa-head-dim must be a positive even number, at least --mm3-rope-dim");
    if (f_.msa_top_k == 0 || f_.msa_block == 0) bad("--msa-top-k and --msa-block-size must be positive");
    if (f_.msa_local > f_.msa_top_k) bad("--msa-local-blocks must be at most --msa-top-k");
  }

  // TextModel's keys in its order (block_count first; feed_forward_length is
  // intermediate_size), MiniMaxM2Model's two, then MiniMaxM3Model's.
  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const std::string a = "minimax-m3.";
    add_minimax_metadata(w, name(), s, head_dim(s), rope_dim(s));
    w.set(a + keys::expert_shared_count, val::u32(f_.n_shared));
    w.set(a + keys::expert_weights_scale, val::f32(f_.weights_scale));
    w.set(a + keys::expert_weights_norm, val::boolean(true));
    w.set(a + keys::attention_indexer_head_count, val::u32(s.n_head_kv));
    w.set(a + keys::attention_indexer_key_length, val::u32(f_.msa_head_dim));
    w.set(a + keys::attention_indexer_top_k, val::u32(f_.msa_top_k));
    w.set(a + keys::attention_indexer_block_size, val::u32(f_.msa_block));
    w.set(a + keys::attention_indexer_local_blocks, val::u32(f_.msa_local));
    w.set(a + keys::leading_dense_block_count, val::u32(f_.n_dense_lead));
  }

  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    if (t.name.find(".indexer.") != std::string::npos) plan.always_f32 = true;  // the converter's tensor_force_quant
    return true;
  }

 private:
  uint32_t head_dim(const Shape& s) const { return f_.head_dim != 0 ? f_.head_dim : s.n_embd / s.n_head; }
  uint32_t rope_dim(const Shape& s) const { return f_.rope_dim != 0 ? f_.rope_dim : head_dim(s) / 2; }
  MinimaxM3Flags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<MinimaxM3Architecture>());

}  // namespace
}  // namespace ns::make_model
