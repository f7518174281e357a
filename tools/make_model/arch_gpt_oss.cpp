// gpt-oss (OpenAI's open-weight MoE; llama.cpp's OPENAI_MOE): GQA attention
// with Q/K/V/O biases and a learned sink logit per head, layers alternating
// sliding-window and full attention (--oss-sliding-window; the pattern is the
// reference's default, even layers slide, unless --oss-swa-period writes
// attention.sliding_window_pattern), YaRN RoPE, every layer MoE with a router
// bias and per-expert biases. --n-ff is the experts' width. Metadata as
// llama.cpp's converter (conversion/gpt_oss.py) writes it; the tensors are
// engine/arch/gpt_oss.cpp's table.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct GptOssFlags {
  uint32_t head_dim = 64;         // attention.key_length (gpt-oss: 64, not n_embd / n_head)
  uint32_t sliding_window = 128;  // attention.sliding_window
  uint32_t swa_period = 0;        // attention.sliding_window_pattern (0: not written, the reference's 2)
  float yarn_factor = 32.0f;      // rope.scaling.factor (0: no rope scaling)
  uint32_t yarn_orig_ctx = 4096;  // rope.scaling.original_context_length
  bool expert_bias = true;        // ffn_{gate,up,down}_exps.bias
};

GptOssFlags& flags() { return shared_flags<GptOssFlags>(); }

class GptOssArchitecture : public Architecture {
 public:
  std::string name() const override { return "gpt-oss"; }

  void add_flags(CLI::App& app) override {
    GptOssFlags& f = flags();
    const char* g = "gpt-oss";
    add_arch_option(app, g, "--oss-head-dim", f.head_dim, "gpt-oss: attention head size");
    add_arch_option(app, g, "--oss-sliding-window", f.sliding_window,
                    "gpt-oss: sliding-window length of the sliding layers");
    add_arch_option(app, g, "--oss-swa-period", f.swa_period,
                    "gpt-oss: write attention.sliding_window_pattern = N (layer il slides when il % N < N - 1; "
                    "0: not written, the reference's default 2)");
    add_arch_option(app, g, "--oss-yarn-factor", f.yarn_factor, "gpt-oss: YaRN context factor (0: no rope scaling)");
    add_arch_option(app, g, "--oss-yarn-orig-ctx", f.yarn_orig_ctx, "gpt-oss: YaRN original context length");
    add_arch_option(app, g, "--oss-expert-bias", f.expert_bias, "gpt-oss: write the experts' biases");
  }

  void validate(const Shape& s) const override {
    const GptOssFlags& f = flags();
    validate_moe_shape(s, "gpt-oss");
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "gpt-oss: " + m); };
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
    add_trunk_metadata(w, name(), s, s.n_layer, s.n_head_kv, BlockCountAt::first);
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::attention_key_length, val::u32(f.head_dim));
    w.set(a + keys::attention_value_length, val::u32(f.head_dim));
    add_yarn_metadata(w, name(), f.yarn_factor, f.yarn_orig_ctx);
    w.set(a + keys::attention_sliding_window, val::u32(f.sliding_window));
    if (f.swa_period > 0) w.set(a + keys::attention_sliding_window_pattern, val::u32(f.swa_period));
    w.set(a + keys::expert_feed_forward_length, val::u32(s.n_ff));
  }

  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    if (t.name.ends_with("_exps.bias")) return flags().expert_bias;
    // Sink logits of the order of the attention scores: they take a visible share of the softmax.
    if (t.name.ends_with("attn_sinks.weight")) plan.init = Init{Init::Kind::normal, 1.0f};
    return true;
  }
};

const ArchitectureRegistrar kRegister(std::make_unique<GptOssArchitecture>());

}  // namespace
}  // namespace ns::make_model
