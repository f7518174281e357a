// deepseek2: DeepSeek V2/V3, Kimi K2, Moonlight shapes. MLA attention with or
// without q_lora, the fused attn_kv_b layout or the split attn_k_b/attn_v_b
// one (--mla-layout), leading dense layers, routed experts with a selection
// bias (exp_probs_b), shared experts, optional expert groups and YaRN.
// Metadata as llama.cpp's converter writes it; the fused layout's keys follow
// ../shared/models/tiny-ds2-*.gguf, the split layout's the converter's MLA
// form (key_length = kv_lora + rope, *_mla head sizes, one KV head). The
// tensors are engine/arch/deepseek2.cpp's table (split when the metadata has
// the *_mla keys).
//
// deepseek32 (DeepSeek V3.2) and glm-dsa (GLM-5.x) are this with the split
// layout and the lightning indexer (--dsa-*): metadata as their converters
// (conversion/deepseek.py DeepseekV32Model, glm.py GlmMoeDsaModel, llama.cpp
// 2026-09-28) write it, deepseek2's then the indexer's keys (and glm-dsa's
// per-layer indexer types with --dsa-types); the tensors are
// engine/arch/deepseek32.cpp's table.
//
// With --mla-layout split, attn_k_b and attn_v_b hold exactly the values the
// fused attn_kv_b would have for the same seed (k_b is its k part transposed),
// so the two layouts of one seed are the same model.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct Deepseek2Flags {
  MlaSizes mla{.q_lora_rank = 96};  // q_lora 0: attn_q, the "lite" models
  uint32_t n_ff_expert = 64;
  uint32_t n_shared = 1;
  uint32_t n_dense_lead = 1;
  std::string gating = "sigmoid";
  float weights_scale = 2.5f;
  bool weights_norm = true;
  std::string layout = "split";
  uint32_t n_groups = 0, n_groups_used = 0;
  float yarn_factor = 0.0f;  // 0: no rope scaling
  uint32_t yarn_orig_ctx = 4096;
  float yarn_log_mul = 0.1f;  // stored as the converter does: 0.1 * mscale_all_dim
  // DeepSeek sparse attention (deepseek32, glm-dsa).
  uint32_t dsa_heads = 8, dsa_head_dim = 64, dsa_top_k = 16;
  std::string dsa_types;   // glm-dsa: "1,0,0,..." per layer (1 full, 0 shared); empty: not written
  uint32_t dsa_nextn = 0;  // NextN blocks after the last layer (block_count counts them)
};

// One flag set for the three variants.
Deepseek2Flags& flags() { return shared_flags<Deepseek2Flags>(); }

class Deepseek2Architecture : public Architecture {
 public:
  explicit Deepseek2Architecture(std::string arch) : arch_(std::move(arch)) {}
  std::string name() const override { return arch_; }

  void add_flags(CLI::App& app) override {
    Deepseek2Flags& f = flags();
    if (arch_ == "deepseek32") {
      const std::string g = "deepseek32, glm-dsa";
      add_arch_option(app, g, "--dsa-heads", f.dsa_heads, "dsa: lightning indexer heads");
      add_arch_option(app, g, "--dsa-head-dim", f.dsa_head_dim, "dsa: indexer key length (a multiple of 64)");
      add_arch_option(app, g, "--dsa-top-k", f.dsa_top_k, "dsa: past positions each query attends to");
      add_arch_option(app, g, "--dsa-nextn-layers", f.dsa_nextn,
                      "dsa: NextN (multi-token prediction) blocks after the last layer (never run)");
      add_arch_option(app, g, "--dsa-types", f.dsa_types,
                      "glm-dsa: per-layer indexer types, e.g. 1,1,0 (1 full, 0 shared; empty: key not written)");
    }
    if (arch_ != "deepseek2") return;
    const std::string g = "deepseek2";
    app.add_option("--q-lora-rank", f.mla.q_lora_rank, "deepseek2: query low-rank width (0: one attn_q projection)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--kv-lora-rank", f.mla.kv_lora_rank, "deepseek2: cached latent width")
        ->capture_default_str()
        ->group(g);
    app.add_option("--qk-rope-dim", f.mla.qk_rope, "deepseek2: rotary dims per head")->capture_default_str()->group(g);
    app.add_option("--qk-nope-dim", f.mla.qk_nope, "deepseek2: non-rotary key dims per head")
        ->capture_default_str()
        ->group(g);
    app.add_option("--v-head-dim", f.mla.v_head, "deepseek2: value dims per head")->capture_default_str()->group(g);
    app.add_option("--n-ff-expert", f.n_ff_expert, "deepseek2: hidden width of each routed (and shared) expert")
        ->capture_default_str()
        ->group(g);
    app.add_option("--n-shared-expert", f.n_shared, "deepseek2: shared experts (always applied)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--n-dense-lead", f.n_dense_lead, "deepseek2: leading dense layers (FFN width --n-ff)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--gating", f.gating, "deepseek2: router function, softmax or sigmoid")
        ->capture_default_str()
        ->check(CLI::IsMember({"softmax", "sigmoid"}))
        ->group(g);
    app.add_option("--expert-weights-scale", f.weights_scale, "deepseek2: routed weights multiplier")
        ->capture_default_str()
        ->group(g);
    app.add_option("--expert-weights-norm", f.weights_norm, "deepseek2: renormalize the chosen weights (true/false)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--mla-layout", f.layout, "deepseek2: kv_b (fused attn_kv_b) or split (attn_k_b + attn_v_b)")
        ->capture_default_str()
        ->check(CLI::IsMember({"kv_b", "split"}))
        ->group(g);
    app.add_option("--n-expert-group", f.n_groups, "deepseek2: expert groups (0: no group-limited routing)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--n-expert-group-used", f.n_groups_used, "deepseek2: groups each token may use")
        ->capture_default_str()
        ->group(g);
    app.add_option("--yarn-factor", f.yarn_factor, "deepseek2: YaRN context factor (0: no rope scaling)")
        ->capture_default_str()
        ->group(g);
    app.add_option("--yarn-orig-ctx", f.yarn_orig_ctx, "deepseek2: YaRN original context length")
        ->capture_default_str()
        ->group(g);
    app.add_option("--yarn-log-mul", f.yarn_log_mul,
                   "deepseek2: rope.scaling.yarn_log_multiplier (0.1 * mscale_all_dim)")
        ->capture_default_str()
        ->group(g);
  }

  void validate(const Shape& s) const override {
    const Deepseek2Flags& f = flags();
    auto bad = [this](const std::string& m) { throw Error(ErrorKind::invalid_input, arch_ + ": " + m); };
    if (dsa()) {
      if (f.layout != "split") bad("--mla-layout must be split (the reference runs DSA on MLA files only)");
      if (f.mla.q_lora_rank == 0) bad("--q-lora-rank must be positive (the indexer reads the low-rank query)");
      if (f.dsa_heads == 0 || f.dsa_top_k == 0) bad("--dsa-heads and --dsa-top-k must be positive");
      if (f.dsa_head_dim == 0 || f.dsa_head_dim % 64 || f.dsa_head_dim < f.mla.qk_rope)
        bad("--dsa-head-dim must be a positive multiple of 64, at least --qk-rope-dim");
      // The reference also rotates a cache whose key length equals the indexer's.
      if (f.mla.mqa_key_length() == f.dsa_head_dim)
        bad("--kv-lora-rank + --qk-rope-dim must differ from --dsa-head-dim");
      if (!f.dsa_types.empty() && arch_ != "glm-dsa") bad("--dsa-types is glm-dsa's");
      if (!f.dsa_types.empty() && types(s).size() != s.n_layer)
        bad("--dsa-types needs one 0/1 per layer (" + std::to_string(s.n_layer) + ")");
      if (!f.dsa_types.empty() && !types(s)[0]) bad("--dsa-types: layer 0 must be full (1)");
    } else if (f.dsa_nextn > 0) {
      bad("--dsa-nextn-layers is deepseek32's and glm-dsa's");
    }
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head and --n-ctx must be positive");
    if (f.mla.kv_lora_rank == 0 || f.mla.qk_nope == 0 || f.mla.v_head == 0)
      bad("--kv-lora-rank, --qk-nope-dim, --v-head-dim must be positive");
    if (f.mla.qk_rope == 0 || f.mla.qk_rope % 2)
      bad("--qk-rope-dim must be a positive even number (RoPE rotates pairs)");
    if (f.n_dense_lead > s.n_layer) bad("--n-dense-lead " + std::to_string(f.n_dense_lead) + " exceeds --n-layer");
    if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
    if (f.n_dense_lead < s.n_layer) {
      if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
        bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
      if (f.n_ff_expert == 0) bad("--n-ff-expert must be positive");
    }
    if (f.n_groups > 1) {
      if (s.n_expert % f.n_groups) bad("--n-expert-group must divide --n-expert");
      if (f.n_groups_used == 0 || f.n_groups_used > f.n_groups)
        bad("--n-expert-group-used must be 1..--n-expert-group");
      if (f.n_groups_used * (s.n_expert / f.n_groups) < s.n_expert_used)
        bad("--n-expert-group-used groups hold fewer experts than --n-expert-used");
    }
    if (f.yarn_factor != 0.0f && !(f.yarn_factor > 1.0f)) bad("--yarn-factor must be above 1 (or 0 for none)");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const Deepseek2Flags& f = flags();
    const bool split = f.layout == "split";
    const std::string a = arch_ + ".";
    // MLA files present one KV head (the shared latent), older ones n_head.
    add_trunk_metadata(w, name(), s, s.n_layer + (dsa() ? f.dsa_nextn : 0), split ? 1 : s.n_head);
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::leading_dense_block_count, val::u32(f.n_dense_lead));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
    w.set(a + keys::attention_kv_lora_rank, val::u32(f.mla.kv_lora_rank));
    if (split) {
      w.set(a + keys::attention_key_length, val::u32(f.mla.mqa_key_length()));
      w.set(a + keys::attention_value_length, val::u32(f.mla.kv_lora_rank));
      w.set(a + keys::attention_key_length_mla, val::u32(f.mla.head_key_length()));
      w.set(a + keys::attention_value_length_mla, val::u32(f.mla.v_head));
    } else {
      w.set(a + keys::attention_key_length, val::u32(f.mla.head_key_length()));
      w.set(a + keys::attention_value_length, val::u32(f.mla.v_head));
    }
    w.set(a + keys::expert_feed_forward_length, val::u32(f.n_ff_expert));
    w.set(a + keys::expert_shared_count, val::u32(f.n_shared));
    w.set(a + keys::expert_weights_scale, val::f32(f.weights_scale));
    w.set(a + keys::expert_weights_norm, val::boolean(f.weights_norm));
    w.set(a + keys::expert_gating_func, val::u32(f.gating == "sigmoid" ? 2 : 1));
    if (f.n_groups > 1) {
      w.set(a + keys::expert_group_count, val::u32(f.n_groups));
      w.set(a + keys::expert_group_used_count, val::u32(f.n_groups_used));
    }
    w.set(a + keys::rope_dimension_count, val::u32(f.mla.qk_rope));
    add_yarn_metadata(w, name(), f.yarn_factor, f.yarn_orig_ctx);
    w.set(a + keys::rope_scaling_yarn_log_multiplier, val::f32(f.yarn_factor != 0.0f ? f.yarn_log_mul : 0.0f));
    if (f.mla.q_lora_rank > 0) w.set(a + keys::attention_q_lora_rank, val::u32(f.mla.q_lora_rank));
    if (!dsa()) return;
    if (f.dsa_nextn > 0) w.set(a + keys::nextn_predict_layers, val::u32(f.dsa_nextn));
    w.set(a + keys::attention_indexer_head_count, val::u32(f.dsa_heads));
    w.set(a + keys::attention_indexer_key_length, val::u32(f.dsa_head_dim));
    w.set(a + keys::attention_indexer_top_k, val::u32(f.dsa_top_k));
    if (!f.dsa_types.empty()) {
      std::vector<Value> v;
      for (const bool full : types(s)) v.push_back(val::boolean(full));
      w.set(a + keys::attention_indexer_types, val::array(ValueType::BOOL, std::move(v)));
    }
  }

  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    // A NextN block's entries are all "skipped" (written), kimi-k3's attn_gate
    // too, which neither the reference's deepseek32/glm-dsa loader nor ours asks
    // for: the reference refuses a file with it (a tensor count mismatch).
    if (dsa() && t.name.ends_with("attn_gate.weight")) return false;
    refine_split_kv_b(t, plan, flags().mla);
    return true;
  }

 private:
  bool dsa() const { return arch_ != "deepseek2"; }
  static std::vector<bool> types(const Shape&) {
    std::vector<bool> out;
    for (const char c : flags().dsa_types)
      if (c == '0' || c == '1') out.push_back(c == '1');
    return out;
  }
  std::string arch_;
};

const ArchitectureRegistrar kRegister(std::make_unique<Deepseek2Architecture>("deepseek2"));
const ArchitectureRegistrar kRegisterV32(std::make_unique<Deepseek2Architecture>("deepseek32"));
const ArchitectureRegistrar kRegisterGlmDsa(std::make_unique<Deepseek2Architecture>("glm-dsa"));

}  // namespace
}  // namespace ns::make_model
