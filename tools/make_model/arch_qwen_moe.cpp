// qwen3moe (Qwen3 MoE: per-head Q/K RMS norms, no biases, head size from
// --head-dim) and qwen2moe (Qwen1.5/Qwen2 MoE: Q/K/V biases, a shared expert
// of width --n-ff-shexp behind a sigmoid gate ffn_gate_inp_shexp). Every
// layer is MoE; --n-ff is the routed experts' width. Names, shapes and
// metadata as llama.cpp's converter writes them (src/llama-arch.cpp,
// src/models/qwen2moe.cpp, qwen3moe.cpp).
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"

namespace ns::make_model {
namespace {

struct QwenFlags {
  uint32_t head_dim = 0;      // qwen3moe: 0 = n_embd / n_head
  uint32_t n_ff_shexp = 128;  // qwen2moe shared expert width
};

// One flag set for both variants (each architecture's flags must be unique on the command line).
QwenFlags& flags() {
  static QwenFlags f;
  return f;
}

class QwenMoeArchitecture : public Architecture {
 public:
  explicit QwenMoeArchitecture(bool qwen3) : qwen3_(qwen3) {}
  std::string name() const override { return qwen3_ ? "qwen3moe" : "qwen2moe"; }

  void add_flags(CLI::App& app) override {
    if (qwen3_) {
      app.add_option("--head-dim", flags().head_dim, "qwen3moe: attention head size (0: n_embd / n_head)")
          ->capture_default_str()->group("qwen3moe");
    } else {
      app.add_option("--n-ff-shexp", flags().n_ff_shexp, "qwen2moe: shared expert width")
          ->capture_default_str()->group("qwen2moe");
    }
  }

  void validate(const Shape& s) const override {
    auto bad = [this](const std::string& m) { throw Error(ErrorKind::invalid_input, name() + ": " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head, --n-head-kv, --n-ff and --n-ctx must be positive");
    if (s.n_head % s.n_head_kv != 0) bad("--n-head must be a multiple of --n-head-kv");
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("every layer is MoE: --n-expert and --n-expert-used (1..--n-expert) are required");
    if (head_dim(s) == 0 || head_dim(s) % 2) bad("the head size must be a positive even number");
    if (!qwen3_ && s.n_embd % s.n_head != 0) bad("--n-embd must be a multiple of --n-head");
    if (!qwen3_ && flags().n_ff_shexp == 0) bad("--n-ff-shexp must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const std::string a = name() + ".";
    w.set(a + "context_length", val::u32(s.n_ctx));
    w.set(a + "embedding_length", val::u32(s.n_embd));
    w.set(a + "block_count", val::u32(s.n_layer));
    w.set(a + "feed_forward_length", val::u32(s.n_ff));
    w.set(a + "attention.head_count", val::u32(s.n_head));
    w.set(a + "attention.head_count_kv", val::u32(s.n_head_kv));
    w.set(a + "rope.freq_base", val::f32(s.rope_base));
    w.set(a + "attention.layer_norm_rms_epsilon", val::f32(s.rms_eps));
    w.set(a + "expert_used_count", val::u32(s.n_expert_used));
    if (qwen3_) {
      w.set(a + "attention.key_length", val::u32(head_dim(s)));
      w.set(a + "attention.value_length", val::u32(head_dim(s)));
    }
    w.set(a + "expert_count", val::u32(s.n_expert));
    w.set(a + "expert_feed_forward_length", val::u32(s.n_ff));
    if (!qwen3_) w.set(a + "expert_shared_feed_forward_length", val::u32(flags().n_ff_shexp));
    w.set(a + "vocab_size", val::u32(s.n_vocab));
  }

  std::vector<TensorPlan> tensors(const Shape& s) const override {
    const uint64_t n_embd = s.n_embd, n_ff = s.n_ff, n_vocab = s.n_vocab, n_expert = s.n_expert;
    const uint64_t hd = head_dim(s), q_dim = hd * s.n_head, kv_dim = hd * s.n_head_kv, shexp = flags().n_ff_shexp;
    const auto proj = [](uint64_t fan_in) { return Init{Init::Kind::normal, 1.0f / std::sqrt(float(fan_in))}; };
    const float residual = 1.0f / std::sqrt(2.0f * float(s.n_layer));
    const auto to_residual = [&](uint64_t fan_in) { return Init{Init::Kind::normal, residual / std::sqrt(float(fan_in))}; };
    const Init norm{Init::Kind::norm, 0.05f};
    const Init bias{Init::Kind::normal, 0.05f};

    std::vector<TensorPlan> t;
    auto add = [&](std::string name, std::vector<uint64_t> dims, Init init, bool always_f32 = false,
                   bool expert = false) { t.push_back({std::move(name), std::move(dims), init, always_f32, expert}); };
    add("token_embd.weight", {n_embd, n_vocab}, Init{Init::Kind::normal, 1.0f});
    add("output_norm.weight", {n_embd}, norm, true);
    if (!s.tied_output) add("output.weight", {n_embd, n_vocab}, proj(n_embd));
    for (uint32_t i = 0; i < s.n_layer; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {n_embd}, norm, true);
      add(b + "attn_q.weight", {n_embd, q_dim}, proj(n_embd));
      add(b + "attn_k.weight", {n_embd, kv_dim}, proj(n_embd));
      add(b + "attn_v.weight", {n_embd, kv_dim}, proj(n_embd));
      if (!qwen3_) {
        add(b + "attn_q.bias", {q_dim}, bias, true);
        add(b + "attn_k.bias", {kv_dim}, bias, true);
        add(b + "attn_v.bias", {kv_dim}, bias, true);
      }
      add(b + "attn_output.weight", {q_dim, n_embd}, to_residual(q_dim));
      if (qwen3_) {
        add(b + "attn_k_norm.weight", {hd}, norm, true);
        add(b + "attn_q_norm.weight", {hd}, norm, true);
      }
      add(b + "ffn_norm.weight", {n_embd}, norm, true);
      add(b + "ffn_gate_inp.weight", {n_embd, n_expert}, proj(n_embd), true);
      add(b + "ffn_gate_exps.weight", {n_embd, n_ff, n_expert}, proj(n_embd), false, true);
      add(b + "ffn_up_exps.weight", {n_embd, n_ff, n_expert}, proj(n_embd), false, true);
      add(b + "ffn_down_exps.weight", {n_ff, n_embd, n_expert}, to_residual(n_ff), false, true);
      if (!qwen3_) {
        add(b + "ffn_gate_inp_shexp.weight", {n_embd}, proj(n_embd), true);
        add(b + "ffn_gate_shexp.weight", {n_embd, shexp}, proj(n_embd));
        add(b + "ffn_up_shexp.weight", {n_embd, shexp}, proj(n_embd));
        add(b + "ffn_down_shexp.weight", {shexp, n_embd}, to_residual(shexp));
      }
    }
    return t;
  }

 private:
  uint32_t head_dim(const Shape& s) const {
    return qwen3_ && flags().head_dim != 0 ? flags().head_dim : s.n_embd / s.n_head;
  }
  bool qwen3_;
};

const ArchitectureRegistrar kRegisterQwen2(std::make_unique<QwenMoeArchitecture>(false));
const ArchitectureRegistrar kRegisterQwen3(std::make_unique<QwenMoeArchitecture>(true));

}  // namespace
}  // namespace ns::make_model
