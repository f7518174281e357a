// gpt-oss (OpenAI's open-weight MoE; llama.cpp's OPENAI_MOE): GQA attention
// with Q/K/V/O biases and a learned sink logit per head, layers alternating
// sliding-window and full attention (--oss-sliding-window; the pattern is the
// reference's default, even layers slide, unless --oss-swa-period writes
// attention.sliding_window_pattern), YaRN RoPE, every layer MoE with a router
// bias and per-expert biases. --n-ff is the experts' width. Names, shapes and
// metadata as llama.cpp's converter (conversion/gpt_oss.py) writes them.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {
namespace {

struct GptOssFlags {
  uint32_t head_dim = 64;          // attention.key_length (gpt-oss: 64, not n_embd / n_head)
  uint32_t sliding_window = 128;   // attention.sliding_window
  uint32_t swa_period = 0;         // attention.sliding_window_pattern (0: not written, the reference's 2)
  float yarn_factor = 32.0f;       // rope.scaling.factor (0: no rope scaling)
  uint32_t yarn_orig_ctx = 4096;   // rope.scaling.original_context_length
  bool expert_bias = true;         // ffn_{gate,up,down}_exps.bias
};

GptOssFlags& flags() {
  static GptOssFlags f;
  return f;
}

class GptOssArchitecture : public Architecture {
 public:
  std::string name() const override { return "gpt-oss"; }

  void add_flags(CLI::App& app) override {
    GptOssFlags& f = flags();
    const char* g = "gpt-oss";
    app.add_option("--oss-head-dim", f.head_dim, "gpt-oss: attention head size")->capture_default_str()->group(g);
    app.add_option("--oss-sliding-window", f.sliding_window, "gpt-oss: sliding-window length of the sliding layers")
        ->capture_default_str()->group(g);
    app.add_option("--oss-swa-period", f.swa_period,
                   "gpt-oss: write attention.sliding_window_pattern = N (layer il slides when il % N < N - 1; "
                   "0: not written, the reference's default 2)")
        ->capture_default_str()->group(g);
    app.add_option("--oss-yarn-factor", f.yarn_factor, "gpt-oss: YaRN context factor (0: no rope scaling)")
        ->capture_default_str()->group(g);
    app.add_option("--oss-yarn-orig-ctx", f.yarn_orig_ctx, "gpt-oss: YaRN original context length")
        ->capture_default_str()->group(g);
    app.add_option("--oss-expert-bias", f.expert_bias, "gpt-oss: write the experts' biases")
        ->capture_default_str()->group(g);
  }

  void validate(const Shape& s) const override {
    const GptOssFlags& f = flags();
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "gpt-oss: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head, --n-head-kv, --n-ff and --n-ctx must be positive");
    if (s.n_head % s.n_head_kv != 0) bad("--n-head must be a multiple of --n-head-kv");
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("every layer is MoE: --n-expert and --n-expert-used (1..--n-expert) are required");
    if (f.head_dim == 0 || f.head_dim % 2) bad("--oss-head-dim must be a positive even number");
    if (f.sliding_window == 0) bad("--oss-sliding-window must be positive");
    if (f.swa_period > s.n_layer) bad("--oss-swa-period must be at most --n-layer");
    if (f.yarn_factor != 0.0f && !(f.yarn_factor > 1.0f)) bad("--oss-yarn-factor must be above 1 (or 0 for none)");
    if (f.yarn_factor != 0.0f && f.yarn_orig_ctx == 0) bad("--oss-yarn-orig-ctx must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const GptOssFlags& f = flags();
    const std::string a = "gpt-oss.";
    w.set(a + "block_count", val::u32(s.n_layer));
    w.set(a + "context_length", val::u32(s.n_ctx));
    w.set(a + "embedding_length", val::u32(s.n_embd));
    w.set(a + "feed_forward_length", val::u32(s.n_ff));
    w.set(a + "attention.head_count", val::u32(s.n_head));
    w.set(a + "attention.head_count_kv", val::u32(s.n_head_kv));
    w.set(a + "rope.freq_base", val::f32(s.rope_base));
    w.set(a + "attention.layer_norm_rms_epsilon", val::f32(s.rms_eps));
    w.set(a + "expert_count", val::u32(s.n_expert));
    w.set(a + "expert_used_count", val::u32(s.n_expert_used));
    w.set(a + "attention.key_length", val::u32(f.head_dim));
    w.set(a + "attention.value_length", val::u32(f.head_dim));
    if (f.yarn_factor != 0.0f) {
      w.set(a + "rope.scaling.type", val::str("yarn"));
      w.set(a + "rope.scaling.factor", val::f32(f.yarn_factor));
      w.set(a + "rope.scaling.original_context_length", val::u32(f.yarn_orig_ctx));
    }
    w.set(a + "attention.sliding_window", val::u32(f.sliding_window));
    if (f.swa_period > 0) w.set(a + "attention.sliding_window_pattern", val::u32(f.swa_period));
    w.set(a + "expert_feed_forward_length", val::u32(s.n_ff));
  }

  std::vector<TensorPlan> tensors(const Shape& s) const override {
    const GptOssFlags& f = flags();
    const uint64_t n_embd = s.n_embd, n_ff = s.n_ff, n_expert = s.n_expert, hd = f.head_dim;
    const uint64_t q_dim = hd * s.n_head, kv_dim = hd * s.n_head_kv;
    const Init bias{Init::Kind::normal, 0.05f};
    // Sink logits of the order of the attention scores: they take a visible share of the softmax.
    const Init sinks{Init::Kind::normal, 1.0f};
    PlanBuilder p(s.n_layer);
    p.add("token_embd.weight", {n_embd, s.n_vocab}, Init{Init::Kind::normal, 1.0f});
    p.add("output_norm.weight", {n_embd}, PlanBuilder::norm(), true);
    if (!s.tied_output) p.add("output.weight", {n_embd, s.n_vocab}, PlanBuilder::proj(n_embd));
    for (uint32_t i = 0; i < s.n_layer; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      p.add(b + "attn_norm.weight", {n_embd}, PlanBuilder::norm(), true);
      p.add(b + "attn_q.weight", {n_embd, q_dim}, PlanBuilder::proj(n_embd));
      p.add(b + "attn_q.bias", {q_dim}, bias, true);
      p.add(b + "attn_k.weight", {n_embd, kv_dim}, PlanBuilder::proj(n_embd));
      p.add(b + "attn_k.bias", {kv_dim}, bias, true);
      p.add(b + "attn_v.weight", {n_embd, kv_dim}, PlanBuilder::proj(n_embd));
      p.add(b + "attn_v.bias", {kv_dim}, bias, true);
      p.add(b + "attn_output.weight", {q_dim, n_embd}, p.to_residual(q_dim));
      p.add(b + "attn_output.bias", {n_embd}, bias, true);
      p.add(b + "attn_sinks.weight", {s.n_head}, sinks, true);
      p.add(b + "post_attention_norm.weight", {n_embd}, PlanBuilder::norm(), true);
      p.add(b + "ffn_gate_inp.weight", {n_embd, n_expert}, PlanBuilder::proj(n_embd), true);
      // A small zero-sum router bias: it moves choices, not the overall balance.
      p.add(b + "ffn_gate_inp.bias", {n_expert}, bias, true);
      p.add(b + "ffn_gate_exps.weight", {n_embd, n_ff, n_expert}, PlanBuilder::proj(n_embd), false, true);
      p.add(b + "ffn_up_exps.weight", {n_embd, n_ff, n_expert}, PlanBuilder::proj(n_embd), false, true);
      p.add(b + "ffn_down_exps.weight", {n_ff, n_embd, n_expert}, p.to_residual(n_ff), false, true);
      if (f.expert_bias) {
        p.add(b + "ffn_gate_exps.bias", {n_ff, n_expert}, bias, true);
        p.add(b + "ffn_up_exps.bias", {n_ff, n_expert}, bias, true);
        p.add(b + "ffn_down_exps.bias", {n_embd, n_expert}, bias, true);
      }
    }
    return p.take();
  }
};

const ArchitectureRegistrar kRegister(std::make_unique<GptOssArchitecture>());

}  // namespace
}  // namespace ns::make_model
