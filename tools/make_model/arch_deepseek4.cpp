// deepseek4: DeepSeek V4 / V4-Flash shapes. Four hyper-connection streams,
// attention with a low-rank query, one key/value head, a sliding window of
// --dsv4-window positions, per-layer compression (--dsv4-ratios: 0, 4 with
// its indexer choosing --dsv4-top-k blocks, 128), sinks and the grouped
// low-rank output; every layer MoE (--n-ff per expert) scored sqrtsoftplus,
// the first --dsv4-hash-layers routed by token id, clamped SwiGLU, a shared
// expert. Metadata as llama.cpp's converter (conversion/deepseek.py
// DeepseekV4Model, 2026-09-28) writes it; the tensors are
// engine/arch/deepseek4.cpp's table.
#include <CLI/CLI.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/plan_builder.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct Deepseek4Flags {
  uint32_t head_dim = 128;
  uint32_t rope_dim = 32;
  uint32_t q_lora = 64;
  uint32_t o_groups = 2;
  uint32_t o_lora = 32;
  std::string ratios = "0,4,128,4";  // one per block (NextN blocks: 0)
  uint32_t hash_layers = 2;
  uint32_t indexer_heads = 8;
  uint32_t indexer_dim = 64;
  uint32_t top_k = 8;
  uint32_t window = 16;
  float swiglu_limit = 1.5f;
  float weights_scale = 1.5f;
  float compress_rope_base = 160000.0f;
  uint32_t n_shared = 1;
};

std::vector<int32_t> parse_ratios(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoi(item));
    } catch (const std::exception&) {
      throw Error(ErrorKind::invalid_input, "deepseek4: --dsv4-ratios '" + s + "' is not a list like 0,4,128,4");
    }
  }
  return out;
}

class Deepseek4Architecture : public Architecture {
 public:
  std::string name() const override { return "deepseek4"; }

  void add_flags(CLI::App& app) override {
    const std::string g = "deepseek4";
    add_arch_option(app, g, "--dsv4-head-dim", f_.head_dim, "deepseek4: attention head size (keys = values)");
    add_arch_option(app, g, "--dsv4-rope-dim", f_.rope_dim, "deepseek4: rotated (last) dims of each head");
    add_arch_option(app, g, "--dsv4-q-lora-rank", f_.q_lora, "deepseek4: query latent width");
    add_arch_option(app, g, "--dsv4-o-groups", f_.o_groups, "deepseek4: head groups of the low-rank output");
    add_arch_option(app, g, "--dsv4-o-lora-rank", f_.o_lora, "deepseek4: output latent width per group");
    add_arch_option(app, g, "--dsv4-ratios", f_.ratios, "deepseek4: compression ratio per block (0, 4 or 128)");
    add_arch_option(app, g, "--dsv4-hash-layers", f_.hash_layers, "deepseek4: leading blocks routed by token id");
    add_arch_option(app, g, "--dsv4-indexer-heads", f_.indexer_heads, "deepseek4: indexer heads");
    add_arch_option(app, g, "--dsv4-indexer-dim", f_.indexer_dim, "deepseek4: indexer key size (a multiple of 64)");
    add_arch_option(app, g, "--dsv4-top-k", f_.top_k, "deepseek4: compressed blocks the indexer keeps");
    add_arch_option(app, g, "--dsv4-window", f_.window, "deepseek4: sliding window of raw keys");
    add_arch_option(app, g, "--dsv4-swiglu-limit", f_.swiglu_limit, "deepseek4: SwiGLU clamp (0: none)");
    add_arch_option(app, g, "--dsv4-weights-scale", f_.weights_scale, "deepseek4: routed experts' weight scale");
    add_arch_option(app, g, "--dsv4-compress-rope-base", f_.compress_rope_base,
                    "deepseek4: RoPE base of the compressed layers");
    add_arch_option(app, g, "--dsv4-n-shared", f_.n_shared, "deepseek4: shared experts");
  }

  void validate(const Shape& s) const override {
    const auto bad = [](const std::string& m) { throw Error(ErrorKind::invalid_input, "deepseek4: " + m); };
    if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      bad("--n-expert and 1..n-expert --n-expert-used are required (every layer is MoE)");
    if (parse_ratios(f_.ratios).size() != s.n_layer) bad("--dsv4-ratios needs one entry per layer (--n-layer)");
    for (int32_t r : parse_ratios(f_.ratios))
      if (r != 0 && r != 4 && r != 128) bad("--dsv4-ratios entries must be 0, 4 or 128");
    if (f_.rope_dim % 2 || f_.rope_dim > f_.head_dim || f_.rope_dim > f_.indexer_dim)
      bad("--dsv4-rope-dim must be even and at most the head and indexer sizes");
    if (f_.indexer_dim % 64 || f_.indexer_dim == f_.head_dim)
      bad("--dsv4-indexer-dim must be a multiple of 64 other than --dsv4-head-dim");
    if (f_.o_groups == 0 || s.n_head % f_.o_groups) bad("--dsv4-o-groups must divide --n-head");
    if (f_.hash_layers > s.n_layer) bad("--dsv4-hash-layers exceeds --n-layer");
    if (f_.window == 0 || f_.top_k == 0) bad("--dsv4-window and --dsv4-top-k must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const std::string a = "deepseek4.";
    shared_n_expert_ = s.n_expert;  // for refine's hash tables
    add_trunk_metadata(w, name(), s, s.n_layer, 1, BlockCountAt::first);
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    w.set(a + keys::expert_gating_func, val::u32(4));  // sqrtsoftplus (scoring_func)
    w.set(a + keys::attention_key_length, val::u32(f_.head_dim));
    w.set(a + keys::attention_value_length, val::u32(f_.head_dim));
    w.set(a + keys::rope_dimension_count, val::u32(f_.rope_dim));
    w.set(a + keys::attention_q_lora_rank, val::u32(f_.q_lora));
    w.set(a + keys::attention_sliding_window, val::u32(f_.window));
    w.set(a + keys::expert_feed_forward_length, val::u32(s.n_ff));
    w.set(a + keys::expert_shared_count, val::u32(f_.n_shared));
    w.set(a + keys::expert_weights_scale, val::f32(f_.weights_scale));
    w.set(a + keys::expert_weights_norm, val::boolean(true));
    w.set(a + keys::swiglu_clamp_exp, val::f32_array(std::vector<float>(s.n_layer, f_.swiglu_limit)));
    w.set(a + keys::swiglu_clamp_shexp, val::f32_array(std::vector<float>(s.n_layer, f_.swiglu_limit)));
    w.set(a + keys::attention_indexer_head_count, val::u32(f_.indexer_heads));
    w.set(a + keys::attention_indexer_key_length, val::u32(f_.indexer_dim));
    w.set(a + keys::attention_indexer_top_k, val::u32(f_.top_k));
    w.set(a + keys::attention_output_group_count, val::u32(f_.o_groups));
    w.set(a + keys::attention_output_lora_rank, val::u32(f_.o_lora));
    w.set(a + keys::attention_compress_ratios, val::i32_array(parse_ratios(f_.ratios)));
    w.set(a + keys::attention_compress_rope_freq_base, val::f32(f_.compress_rope_base));
    w.set(a + keys::hyper_connection_count, val::u32(4));
    w.set(a + keys::hyper_connection_sinkhorn_iterations, val::u32(20));
    w.set(a + keys::hyper_connection_epsilon, val::f32(1e-6f));
    w.set(a + keys::hash_layer_count, val::u32(f_.hash_layers));
    w.set(a + keys::embedding_length_out, val::u32(4 * s.n_embd));
  }

  // Scales near 1 so the streams' mixes depend on the input; positional
  // biases of the compressors of unit size so a block's weights differ by
  // position; hash tables of distinct valid expert ids.
  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    const auto ends = [&](const std::string& suffix) {
      const size_t n = suffix.size();
      return t.name.size() >= n && t.name.compare(t.name.size() - n, n, suffix) == 0;
    };
    if (ends("_scale.weight")) plan.init = PlanBuilder::norm();
    if (ends("_ape.weight")) plan.init = Init{Init::Kind::normal, 1.0f};
    if (ends("ffn_gate_tid2eid.weight")) {
      const uint64_t n_expert = shared_n_expert_;
      plan.fill = [n_expert](uint64_t seed, uint64_t row, float* out, int64_t n) {
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + row * 0xBF58476D1CE4E5B9ull + 1;
        for (int64_t k = 0; k < n; ++k) {
          for (;;) {
            x ^= x >> 31;
            x *= 0x94D049BB133111EBull;
            x ^= x >> 29;
            const auto e = static_cast<float>(x % n_expert);
            bool dup = false;
            for (int64_t j = 0; j < k; ++j) dup = dup || out[j] == e;
            if (!dup) {
              out[k] = e;
              break;
            }
          }
        }
      };
    }
    return true;
  }

 private:
  Deepseek4Flags f_;
  mutable uint64_t shared_n_expert_ = 1;
};

const ArchitectureRegistrar kRegister(std::make_unique<Deepseek4Architecture>());

}  // namespace
}  // namespace ns::make_model
