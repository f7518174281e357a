// kimi-linear: Kimi Linear shapes. KDA (Kimi Delta Attention) layers with an
// MLA layer every --mla-every layers, DeepSeek-style FFN (leading dense
// layers, sigmoid-routed experts with a selection bias, shared experts).
// Names, shapes and metadata as llama.cpp's converter (conversion/kimi_linear.py,
// 2026-09-28) writes them: attention.head_count_kv one entry per layer (0 for
// KDA layers, 1 for MLA layers: the MQA view of the latent), the MLA split
// into attn_k_b/attn_v_b, conv weights [d_conv, 1, d_inner, 1], ssm_a holding
// -exp(A_log) as [1, n_head, 1, 1].
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/util/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {
namespace {

struct KimiLinearFlags {
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
};

class KimiLinearArchitecture : public Architecture {
 public:
  std::string name() const override { return "kimi-linear"; }

  void add_flags(CLI::App& app) override {
    KimiLinearFlags& f = f_;
    const std::string g = "kimi-linear";
    app.add_option("--mla-every", f.mla_every, "kimi-linear: every Nth layer is MLA, the others KDA")
        ->capture_default_str()->group(g);
    app.add_option("--kda-head-dim", f.kda_head_dim, "kimi-linear: KDA head size (key = value)")
        ->capture_default_str()->group(g);
    app.add_option("--conv-kernel", f.d_conv, "kimi-linear: KDA short convolution taps")->capture_default_str()->group(g);
    app.add_option("--kl-kv-lora-rank", f.kv_lora_rank, "kimi-linear: MLA latent width")->capture_default_str()->group(g);
    app.add_option("--kl-qk-rope-dim", f.qk_rope, "kimi-linear: MLA rope-part dims per head (never rotated)")
        ->capture_default_str()->group(g);
    app.add_option("--kl-qk-nope-dim", f.qk_nope, "kimi-linear: MLA nope dims per head")->capture_default_str()->group(g);
    app.add_option("--kl-v-head-dim", f.v_head, "kimi-linear: MLA value dims per head")->capture_default_str()->group(g);
    app.add_option("--kl-q-lora-rank", f.q_lora_rank, "kimi-linear: MLA query low-rank width (0: attn_q)")
        ->capture_default_str()->group(g);
    app.add_option("--kl-n-ff-expert", f.n_ff_expert, "kimi-linear: hidden width of each routed (and shared) expert")
        ->capture_default_str()->group(g);
    app.add_option("--kl-n-shared-expert", f.n_shared, "kimi-linear: shared experts")->capture_default_str()->group(g);
    app.add_option("--kl-n-dense-lead", f.n_dense_lead, "kimi-linear: leading dense layers (FFN width --n-ff)")
        ->capture_default_str()->group(g);
    app.add_option("--kl-expert-weights-scale", f.weights_scale, "kimi-linear: routed weights multiplier")
        ->capture_default_str()->group(g);
  }

  void validate(const Shape& s) const override {
    const KimiLinearFlags& f = f_;
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "kimi-linear: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head and --n-ctx must be positive");
    if (f.mla_every == 0) bad("--mla-every must be positive (1: every layer MLA)");
    if (f.kda_head_dim == 0 || f.d_conv == 0) bad("--kda-head-dim and --conv-kernel must be positive");
    if (f.kv_lora_rank == 0 || f.qk_nope == 0 || f.v_head == 0 || f.qk_rope == 0)
      bad("--kl-kv-lora-rank, --kl-qk-nope-dim, --kl-qk-rope-dim, --kl-v-head-dim must be positive");
    if (f.n_dense_lead > s.n_layer) bad("--kl-n-dense-lead exceeds --n-layer");
    if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
    if (f.n_dense_lead < s.n_layer && (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert))
      bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
  }

  bool is_mla(uint32_t il) const { return (il + 1) % f_.mla_every == 0; }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const KimiLinearFlags& f = f_;
    const std::string a = "kimi-linear.";
    w.set(a + "context_length", val::u32(s.n_ctx));
    w.set(a + "embedding_length", val::u32(s.n_embd));
    w.set(a + "feed_forward_length", val::u32(s.n_ff));
    w.set(a + "attention.head_count", val::u32(s.n_head));
    std::vector<int32_t> kv;
    for (uint32_t il = 0; il < s.n_layer; ++il) kv.push_back(is_mla(il) ? 1 : 0);
    w.set(a + "block_count", val::u32(s.n_layer));
    w.set(a + "attention.head_count_kv", val::i32_array(kv));
    w.set(a + "rope.freq_base", val::f32(s.rope_base));
    w.set(a + "attention.layer_norm_rms_epsilon", val::f32(s.rms_eps));
    w.set(a + "expert_count", val::u32(s.n_expert));
    w.set(a + "expert_used_count", val::u32(s.n_expert_used));
    w.set(a + "expert_gating_func", val::u32(2));  // sigmoid
    w.set(a + "vocab_size", val::u32(s.n_vocab));
    w.set(a + "ssm.conv_kernel", val::u32(f.d_conv));
    w.set(a + "kda.head_dim", val::u32(f.kda_head_dim));
    if (f.q_lora_rank > 0) w.set(a + "attention.q_lora_rank", val::u32(f.q_lora_rank));
    w.set(a + "attention.kv_lora_rank", val::u32(f.kv_lora_rank));
    w.set(a + "rope.dimension_count", val::u32(f.qk_rope));
    w.set(a + "attention.key_length", val::u32(f.kv_lora_rank + f.qk_rope));
    w.set(a + "attention.key_length_mla", val::u32(f.qk_nope + f.qk_rope));
    w.set(a + "attention.value_length_mla", val::u32(f.v_head));
    w.set(a + "expert_feed_forward_length", val::u32(f.n_ff_expert));
    w.set(a + "expert_shared_count", val::u32(f.n_shared));
    w.set(a + "leading_dense_block_count", val::u32(f.n_dense_lead));
    w.set(a + "expert_weights_scale", val::f32(f.weights_scale));
  }

  std::vector<TensorPlan> tensors(const Shape& s) const override {
    const KimiLinearFlags& f = f_;
    const uint64_t n_embd = s.n_embd, n_head = s.n_head, S = f.kda_head_dim, d_inner = n_head * S;
    const MlaDims mla{n_embd, n_head, f.q_lora_rank, f.kv_lora_rank, f.qk_rope, f.qk_nope, f.v_head, false};
    const DeepseekFfnDims ffn{n_embd, s.n_ff, s.n_expert, f.n_ff_expert, f.n_shared};
    PlanBuilder p(s.n_layer);
    p.add("token_embd.weight", {n_embd, s.n_vocab}, Init{Init::Kind::normal, 1.0f});
    p.add("output_norm.weight", {n_embd}, PlanBuilder::norm(), true);
    if (!s.tied_output) p.add("output.weight", {n_embd, s.n_vocab}, PlanBuilder::proj(n_embd));
    for (uint32_t i = 0; i < s.n_layer; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      p.add(b + "attn_norm.weight", {n_embd}, PlanBuilder::norm(), true);
      if (is_mla(i)) {
        add_mla(p, b, mla);
      } else {
        add_kda(p, b, n_embd, n_head, S, d_inner);
      }
      p.add(b + "ffn_norm.weight", {n_embd}, PlanBuilder::norm(), true);
      add_deepseek_ffn(p, b, ffn, i < f.n_dense_lead);
    }
    return p.take();
  }

 private:
  void add_kda(PlanBuilder& p, const std::string& b, uint64_t n_embd, uint64_t n_head, uint64_t S,
               uint64_t d_inner) const {
    const uint64_t d_conv = f_.d_conv;
    // Each channel's taps are a row: centred like every "normal" row.
    const Init conv{Init::Kind::normal, 1.0f / std::sqrt(float(d_conv))};
    for (const char* which : {"q", "k", "v"})
      p.add(b + "ssm_conv1d_" + which + ".weight", {d_conv, 1, d_inner, 1}, conv, true);
    p.add(b + "attn_q.weight", {n_embd, d_inner}, PlanBuilder::proj(n_embd));
    p.add(b + "attn_k.weight", {n_embd, d_inner}, PlanBuilder::proj(n_embd));
    p.add(b + "attn_v.weight", {n_embd, d_inner}, PlanBuilder::proj(n_embd));
    p.add(b + "ssm_f_a.weight", {n_embd, S}, PlanBuilder::proj(n_embd));
    p.add(b + "ssm_f_b.weight", {S, d_inner}, PlanBuilder::proj(S));
    p.add(b + "ssm_beta.weight", {n_embd, n_head}, PlanBuilder::proj(n_embd));
    // ssm_a = -exp(A_log) < 0, one per head: -1, -1.5, -2, -2.5, -1, ... (exact, seed-independent).
    TensorPlan a{b + "ssm_a", {1, n_head, 1, 1}, Init{Init::Kind::normal, 1.0f}, true};
    a.fill = [](uint64_t, uint64_t row, float* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = -(1.0f + 0.5f * float(row % 4));
    };
    p.add(std::move(a));
    p.add(b + "ssm_dt.bias", {d_inner}, Init{Init::Kind::normal, 0.5f}, true);
    p.add(b + "ssm_g_a.weight", {n_embd, S}, PlanBuilder::proj(n_embd));
    p.add(b + "ssm_g_b.weight", {S, d_inner}, PlanBuilder::proj(S));
    p.add(b + "ssm_norm.weight", {S}, PlanBuilder::norm(), true);
    p.add(b + "attn_output.weight", {d_inner, n_embd}, p.to_residual(d_inner));
  }

  KimiLinearFlags f_;
};

const ArchitectureRegistrar kRegister(std::make_unique<KimiLinearArchitecture>());

}  // namespace
}  // namespace ns::make_model
