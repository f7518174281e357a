// qwen3next (Qwen3-Next) and qwen35moe (Qwen3.5 MoE) shapes: Gated DeltaNet
// layers with a gated full-attention layer every --full-attn-every layers,
// every layer MoE (--n-ff per routed expert) with a shared expert of
// --qn-n-ff-shexp behind a sigmoid gate. The tensors are
// engine/arch/qwen_next.cpp's table. Names, shapes and metadata as
// llama.cpp's converter (conversion/qwen.py, 2026-09-28) writes them: attn_q
// twice the query width (per head query then gate), attn_qkv/attn_gate for the
// delta-net projections, ssm_conv1d [d_conv, conv channels], ssm_a holding
// -exp(A_log), qwen3next's beta/alpha as one ssm_ba (per key head: the b of its
// value heads, then their a), qwen35moe's as ssm_beta and ssm_alpha, and
// qwen35moe's rope.dimension_sections. Norm weights are written as the
// converter leaves them (its +1 is folded in already). --qn-nextn-layers appends
// NextN blocks as the converter does (block_count counts them,
// nextn_predict_layers says how many); --qn-layer-types writes
// attention.recurrent_layers as a config with layer_types gets.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct QwenNextFlags {
  uint32_t full_attn_every = 4;  // layer il is full attention when (il + 1) % N == 0 (Qwen3-Next: 4)
  uint32_t head_dim = 64;        // full-attention head size
  uint32_t rope_dim = 16;        // rotated dims per head (the checkpoints rotate a quarter)
  uint32_t gdn_head_dim = 32;    // delta-net key = value head size (ssm.state_size)
  uint32_t gdn_k_heads = 2;      // ssm.group_count
  uint32_t gdn_v_heads = 4;      // ssm.time_step_rank
  uint32_t d_conv = 4;
  uint32_t n_ff_shexp = 128;
  std::vector<int32_t> rope_sections = {3, 3, 2, 0};  // qwen35moe (Qwen3.5: 11, 11, 10, 0 of 32 pairs)
  uint32_t nextn = 0;                                 // NextN (multi-token prediction) blocks appended after the trunk
  bool layer_types = false;  // write attention.recurrent_layers (as for a config with layer_types)

  bool is_attention(uint32_t il) const { return (il + 1) % full_attn_every == 0; }
};

// One flag set for both architectures.
QwenNextFlags& flags() { return shared_flags<QwenNextFlags>(); }

class QwenNextArchitecture : public Architecture {
 public:
  explicit QwenNextArchitecture(bool qwen35) : qwen35_(qwen35) {}
  std::string name() const override { return qwen35_ ? "qwen35moe" : "qwen3next"; }

  void add_flags(CLI::App& app) override {
    if (app.get_option_no_throw("--full-attn-every") != nullptr) return;
    QwenNextFlags& f = flags();
    const std::string g = "qwen3next, qwen35moe";
    add_arch_option(app, g, "--full-attn-every", f.full_attn_every,
                    "qwen3next/35moe: every Nth layer is full attention");
    add_arch_option(app, g, "--qn-head-dim", f.head_dim, "qwen3next/35moe: full-attention head size");
    add_arch_option(app, g, "--qn-rope-dim", f.rope_dim, "qwen3next/35moe: rotated dims per attention head");
    add_arch_option(app, g, "--gdn-head-dim", f.gdn_head_dim, "qwen3next/35moe: Gated DeltaNet head size");
    add_arch_option(app, g, "--gdn-k-heads", f.gdn_k_heads, "qwen3next/35moe: Gated DeltaNet key heads");
    add_arch_option(app, g, "--gdn-v-heads", f.gdn_v_heads,
                    "qwen3next/35moe: Gated DeltaNet value heads (a multiple of the key heads)");
    add_arch_option(app, g, "--gdn-conv-kernel", f.d_conv, "qwen3next/35moe: short convolution taps");
    add_arch_option(app, g, "--qn-n-ff-shexp", f.n_ff_shexp, "qwen3next/35moe: shared expert width");
    add_arch_option(app, g, "--qn-rope-sections", f.rope_sections, "qwen35moe: rope.dimension_sections (4 numbers)")
        ->delimiter(',');
    add_arch_option(app, g, "--qn-nextn-layers", f.nextn,
                    "qwen3next/35moe: NextN (MTP) blocks after --n-layer (never run)");
    add_arch_option(app, g, "--qn-layer-types", f.layer_types,
                    "qwen3next/35moe: also write attention.recurrent_layers, one flag per block (true/false)");
  }

  void validate(const Shape& s) const override {
    const QwenNextFlags& f = flags();
    validate_moe_shape(s, name());
    auto bad = [this](const std::string& m) { throw Error(ErrorKind::invalid_input, name() + ": " + m); };
    if (f.full_attn_every == 0) bad("--full-attn-every must be positive (1: every layer full attention)");
    if (f.head_dim == 0 || f.rope_dim == 0 || f.rope_dim % 2 || f.rope_dim > f.head_dim)
      bad("--qn-rope-dim must be even and between 2 and --qn-head-dim");
    if (f.gdn_head_dim == 0 || f.gdn_k_heads == 0 || f.gdn_v_heads % f.gdn_k_heads != 0 || f.gdn_v_heads == 0)
      bad("--gdn-head-dim, --gdn-k-heads must be positive and --gdn-v-heads a multiple of --gdn-k-heads");
    if (f.d_conv == 0 || f.n_ff_shexp == 0) bad("--gdn-conv-kernel and --qn-n-ff-shexp must be positive");
    if (qwen35_) {
      if (f.rope_sections.size() != 4) bad("--qn-rope-sections takes 4 numbers");
      int32_t sum = 0;
      for (int32_t v : f.rope_sections) {
        if (v < 0) bad("--qn-rope-sections must not be negative");
        sum += v;
      }
      if (sum == 0 || sum > static_cast<int32_t>(f.head_dim))
        bad("--qn-rope-sections must sum to between 1 and --qn-head-dim");
    }
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const QwenNextFlags& f = flags();
    const std::string a = name() + ".";
    add_trunk_metadata(w, name(), s, s.n_layer + f.nextn, s.n_head_kv);
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::attention_key_length, val::u32(f.head_dim));
    w.set(a + keys::attention_value_length, val::u32(f.head_dim));
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_feed_forward_length, val::u32(s.n_ff));
    w.set(a + keys::expert_shared_feed_forward_length, val::u32(f.n_ff_shexp));
    w.set(a + keys::ssm_conv_kernel, val::u32(f.d_conv));
    w.set(a + keys::ssm_state_size, val::u32(f.gdn_head_dim));
    w.set(a + keys::ssm_group_count, val::u32(f.gdn_k_heads));
    w.set(a + keys::ssm_time_step_rank, val::u32(f.gdn_v_heads));
    w.set(a + keys::ssm_inner_size, val::u32(f.gdn_head_dim * f.gdn_v_heads));
    if (f.layer_types) {  // the NextN blocks are attention blocks: false
      std::vector<Value> flags;
      for (uint32_t il = 0; il < s.n_layer + f.nextn; ++il)
        flags.push_back(val::boolean(il < s.n_layer && !f.is_attention(il)));
      w.set(a + keys::attention_recurrent_layers, val::array(ValueType::BOOL, std::move(flags)));
    }
    w.set(a + keys::full_attention_interval, val::u32(f.full_attn_every));
    w.set(a + keys::rope_dimension_count, val::u32(f.rope_dim));
    if (qwen35_) w.set(a + keys::rope_dimension_sections, val::i32_array(f.rope_sections));
    if (f.nextn > 0) w.set(a + keys::nextn_predict_layers, val::u32(f.nextn));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
  }

  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    refine_decay(t, plan);
    return true;
  }

 private:
  bool qwen35_;
};

const ArchitectureRegistrar kRegisterNext(std::make_unique<QwenNextArchitecture>(false));
const ArchitectureRegistrar kRegister35(std::make_unique<QwenNextArchitecture>(true));

}  // namespace
}  // namespace ns::make_model
