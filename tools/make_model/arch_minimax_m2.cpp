// minimax-m2: MiniMax-M2 shapes. GQA attention with full-width Q/K RMS norms
// (one over all heads of a token), partial NEOX RoPE over --mm-rope-dim dims of
// each --mm-head-dim head; every layer sigmoid-routed experts (--n-ff wide)
// with a selection bias, no shared expert. Metadata as llama.cpp's converter
// (conversion/minimax.py MiniMaxM2Model over TextModel, 2026-09-28) writes it;
// the tensors are engine/arch/minimax_m2.cpp's table.
#include <CLI/CLI.hpp>

#include <string>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct MinimaxM2Flags {
  uint32_t head_dim = 0;  // 0: n_embd / n_head
  uint32_t rope_dim = 0;  // 0: half the head (MiniMax-M2: rotary_dim 64 of head_dim 128)
};

class MinimaxM2Architecture : public Architecture {
 public:
  std::string name() const override { return "minimax-m2"; }

  void add_flags(CLI::App& app) override {
    const std::string g = "minimax-m2";
    add_arch_option(app, g, "--mm-head-dim", f_.head_dim, "minimax-m2: attention head size (0: n_embd / n_head)");
    add_arch_option(app, g, "--mm-rope-dim", f_.rope_dim, "minimax-m2: rotated dims per head (0: half the head)");
  }

  void validate(const Shape& s) const override {
    validate_moe_shape(s, name());
    if (head_dim(s) == 0)
      throw Error(ErrorKind::invalid_input, "minimax-m2: the head size must be positive (--mm-head-dim)");
    if (rope_dim(s) == 0 || rope_dim(s) % 2 || rope_dim(s) > head_dim(s))
      throw Error(ErrorKind::invalid_input,
                  "minimax-m2: --mm-rope-dim must be a positive even number up to the head size");
  }

  // feed_forward_length is intermediate_size, the experts' width.
  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    add_minimax_metadata(w, name(), s, head_dim(s), rope_dim(s));
  }

 private:
  uint32_t head_dim(const Shape& s) const { return f_.head_dim != 0 ? f_.head_dim : s.n_embd / s.n_head; }
  uint32_t rope_dim(const Shape& s) const { return f_.rope_dim != 0 ? f_.rope_dim : head_dim(s) / 2; }
  MinimaxM2Flags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<MinimaxM2Architecture>());

}  // namespace

void add_minimax_metadata(gguf::GgufWriter& w, const std::string& arch, const Shape& s, uint32_t head_dim,
                          uint32_t rope_dim) {
  using namespace gguf;
  const std::string a = arch + ".";
  add_trunk_metadata(w, arch, s, s.n_layer, s.n_head_kv, BlockCountAt::first);
  w.set(a + keys::expert_count, val::u32(s.n_expert));
  w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
  w.set(a + keys::expert_gating_func, val::u32(2));  // sigmoid (scoring_func)
  w.set(a + keys::attention_key_length, val::u32(head_dim));
  w.set(a + keys::attention_value_length, val::u32(head_dim));
  w.set(a + keys::expert_feed_forward_length, val::u32(s.n_ff));
  w.set(a + keys::rope_dimension_count, val::u32(rope_dim));
}
}  // namespace ns::make_model
