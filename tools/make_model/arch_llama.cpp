// llama: dense (Llama 2/3 layout) or Mixtral-style MoE when --n-expert > 0.
// Names, shapes and metadata as llama.cpp's converter writes them
// (src/llama-arch.cpp, src/llama-model.cpp; compare ../shared/models/tiny-*.gguf).
#include <cmath>
#include <string>

#include "common/error.h"
#include "tools/make_model/architecture.h"

namespace ns::make_model {
namespace {

class LlamaArchitecture : public Architecture {
 public:
  std::string name() const override { return "llama"; }

  void validate(const Shape& s) const override {
    auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "llama: " + m); };
    if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0 || s.n_ctx == 0)
      bad("--n-embd, --n-layer, --n-head, --n-head-kv, --n-ff and --n-ctx must be positive");
    if (s.n_embd % s.n_head != 0)
      bad("--n-embd " + std::to_string(s.n_embd) + " is not a multiple of --n-head " + std::to_string(s.n_head));
    if ((s.n_embd / s.n_head) % 2 != 0)
      bad("the head size --n-embd / --n-head = " + std::to_string(s.n_embd / s.n_head) +
          " must be even (RoPE rotates pairs)");
    if (s.n_head % s.n_head_kv != 0)
      bad("--n-head " + std::to_string(s.n_head) + " is not a multiple of --n-head-kv " +
          std::to_string(s.n_head_kv));
    if (s.n_expert == 0 && s.n_expert_used != 0) bad("--n-expert-used needs --n-expert");
    if (s.n_expert > 0 && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert))
      bad("--n-expert " + std::to_string(s.n_expert) + " needs --n-expert-used between 1 and " +
          std::to_string(s.n_expert) + " (experts per token, e.g. 2)");
    if (!(s.rope_base > 0)) bad("--rope-base must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    w.set("llama.context_length", val::u32(s.n_ctx));
    w.set("llama.embedding_length", val::u32(s.n_embd));
    w.set("llama.block_count", val::u32(s.n_layer));
    w.set("llama.feed_forward_length", val::u32(s.n_ff));
    w.set("llama.attention.head_count", val::u32(s.n_head));
    w.set("llama.attention.head_count_kv", val::u32(s.n_head_kv));
    w.set("llama.rope.freq_base", val::f32(s.rope_base));
    w.set("llama.attention.layer_norm_rms_epsilon", val::f32(s.rms_eps));
    w.set("llama.rope.dimension_count", val::u32(s.n_embd / s.n_head));
    w.set("llama.vocab_size", val::u32(s.n_vocab));
    if (s.n_expert > 0) {
      w.set("llama.expert_count", val::u32(s.n_expert));
      w.set("llama.expert_used_count", val::u32(s.n_expert_used));
    }
  }

  std::vector<TensorPlan> tensors(const Shape& s) const override {
    const uint64_t n_embd = s.n_embd, n_ff = s.n_ff, n_vocab = s.n_vocab, n_expert = s.n_expert;
    const uint64_t n_embd_kv = uint64_t{s.n_embd} / s.n_head * s.n_head_kv;

    // Scales like a trained pre-norm model: inputs of a projection have RMS ~1,
    // so std 1/sqrt(fan_in) keeps outputs ~1; the projections that write into
    // the residual stream are further scaled by 1/sqrt(2 n_layer) (GPT-2's
    // init) so the stream stays ~1 however deep the model is.
    const auto proj = [](uint64_t fan_in) { return Init{Init::Kind::normal, 1.0f / std::sqrt(float(fan_in))}; };
    const float residual = 1.0f / std::sqrt(2.0f * float(s.n_layer));
    const auto to_residual = [&](uint64_t fan_in) {
      return Init{Init::Kind::normal, residual / std::sqrt(float(fan_in))};
    };
    const Init norm{Init::Kind::norm, 0.05f};
    const Init embedding{Init::Kind::normal, 1.0f};

    std::vector<TensorPlan> t;
    auto add = [&](std::string name, std::vector<uint64_t> dims, Init init, bool always_f32 = false,
                   bool expert = false) {
      t.push_back({std::move(name), std::move(dims), init, always_f32, expert});
    };
    add("token_embd.weight", {n_embd, n_vocab}, embedding);
    add("output_norm.weight", {n_embd}, norm, true);
    if (!s.tied_output) add("output.weight", {n_embd, n_vocab}, proj(n_embd));
    for (uint32_t i = 0; i < s.n_layer; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {n_embd}, norm, true);
      add(b + "attn_q.weight", {n_embd, n_embd}, proj(n_embd));
      add(b + "attn_k.weight", {n_embd, n_embd_kv}, proj(n_embd));
      add(b + "attn_v.weight", {n_embd, n_embd_kv}, proj(n_embd));
      add(b + "attn_output.weight", {n_embd, n_embd}, to_residual(n_embd));
      add(b + "ffn_norm.weight", {n_embd}, norm, true);
      if (n_expert > 0) {
        // The router: logits ~N(0, 1) per expert for any normalized input, so
        // random tokens spread evenly over the experts.
        add(b + "ffn_gate_inp.weight", {n_embd, n_expert}, proj(n_embd), true);
        add(b + "ffn_gate_exps.weight", {n_embd, n_ff, n_expert}, proj(n_embd), false, true);
        add(b + "ffn_up_exps.weight", {n_embd, n_ff, n_expert}, proj(n_embd), false, true);
        add(b + "ffn_down_exps.weight", {n_ff, n_embd, n_expert}, to_residual(n_ff), false, true);
      } else {
        add(b + "ffn_gate.weight", {n_embd, n_ff}, proj(n_embd));
        add(b + "ffn_up.weight", {n_embd, n_ff}, proj(n_embd));
        add(b + "ffn_down.weight", {n_ff, n_embd}, to_residual(n_ff));
      }
    }
    return t;
  }
};

const ArchitectureRegistrar kRegister(std::make_unique<LlamaArchitecture>());

}  // namespace
}  // namespace ns::make_model
