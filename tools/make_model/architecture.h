// What the generator needs to know about one model architecture: its flags
// beyond the common ones and its hyperparameter metadata; its tensors are the
// engine's table of the architecture (table_plans.h), which it may refine.
//
// One file per architecture (arch_llama.cpp, arch_deepseek2.cpp, ...)
// defines a subclass and registers it with a file-scope ArchitectureRegistrar;
// nothing else changes to add one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "engine/spec/tensor_table.h"
#include "tools/make_model/weight_init.h"

namespace CLI {
class App;
}

namespace ns::make_model {

// The common shape flags. Architectures read what they use and reject what
// does not make sense for them.
struct Shape {
  uint32_t n_embd = 128;
  uint32_t n_layer = 3;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t n_ff = 256;         // per expert in MoE layers
  uint32_t n_expert = 0;       // 0: dense
  uint32_t n_expert_used = 0;  // experts per token
  uint32_t n_ctx = 2048;       // context_length written to the metadata
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  uint32_t n_vocab = 0;      // set from the vocabulary
  bool tied_output = false;  // no output.weight: the head reuses token_embd
};

// One tensor to generate.
struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the row (input features)
  Init init;
  bool always_f32 = false;  // norms and routers keep full precision
  bool expert = false;      // last dim indexes experts (only n_expert_used of them are active per token)
  bool i32 = false;         // an integer table (role ids): written as I32, the values rounded
  // When set, row `row` comes from fill(seed, row, out, n) instead of `init`:
  // for tensors whose values are derived from another tensor's (deepseek2's
  // attn_k_b/attn_v_b are a re-layout of attn_kv_b). Must be thread-safe.
  std::function<void(uint64_t seed, uint64_t row, float* out, int64_t n)> fill = {};
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual std::string name() const = 0;  // general.architecture
  // Architecture-specific flags (e.g. deepseek2's --kv-lora-rank), in their own group.
  virtual void add_flags(CLI::App& app) { (void)app; }
  // Throws ns::Error(invalid_input) naming the flag to fix.
  virtual void validate(const Shape& shape) const = 0;
  // "<arch>.*" hyperparameters, in the order llama.cpp's converter writes them.
  virtual void add_metadata(gguf::GgufWriter& w, const Shape& shape) const = 0;
  // The generator's say over one entry of the engine's tensor table (table_plans.h),
  // `plan` made from its role: may change its initial values; false leaves an
  // optional tensor out (a flag turned it off). The default keeps the plan.
  virtual bool refine(const TensorSpec& spec, TensorPlan& plan) const {
    (void)spec;
    (void)plan;
    return true;
  }
};

// An architecture's flag values: one object per Flags type, which every
// registered variant of the architecture reads (CLI11 binds a flag to one
// variable, and each flag must be unique on the command line).
template <class Flags>
Flags& shared_flags() {
  static Flags f;
  return f;
}

// An architecture's flag: app.add_option(flag, value, help) in the architecture's
// --help group, its default shown. (App is CLI::App, a parameter so that this
// header needs only CLI11's forward declaration.)
template <class App, class T>
auto add_arch_option(App& app, const std::string& group, const std::string& flag, T& value, const std::string& help) {
  return app.add_option(flag, value, help)->capture_default_str()->group(group);
}

// The checks of the common shape made by the architectures whose every layer
// is MoE under grouped-query attention (qwen2moe/qwen3moe, qwen3next/qwen35moe,
// gpt-oss): positive sizes, --n-head a multiple of --n-head-kv, 1..--n-expert
// experts per token. Throws ns::Error(invalid_input) "<arch>: ..." naming the flags.
void validate_moe_shape(const Shape& s, const std::string& arch);

// The trunk's hyperparameters every transformer file starts its "<arch>." keys
// with: context_length, embedding_length, block_count, feed_forward_length,
// attention.head_count, attention.head_count_kv, rope.freq_base,
// attention.layer_norm_rms_epsilon, from `s` but for `block_count` (NextN
// blocks included) and `head_count_kv` (MLA files: one). Where block_count
// stands: the converters' TextModel writes it first (glm4moe, gpt-oss), the
// files this generator first followed (llama, deepseek2, qwen*) after
// embedding_length. The kimi hybrids' converter has an order of its own
// (kimi_hybrid.cpp). Key order is part of the file's bytes.
enum class BlockCountAt { after_embedding, first };
void add_trunk_metadata(gguf::GgufWriter& w, const std::string& arch, const Shape& s, uint32_t block_count,
                        uint32_t head_count_kv, BlockCountAt at = BlockCountAt::after_embedding);
// YaRN rope scaling (rope.scaling.type "yarn", factor, original_context_length)
// when `factor` is not 0; nothing otherwise.
void add_yarn_metadata(gguf::GgufWriter& w, const std::string& arch, float factor, uint32_t orig_ctx);
// MiniMax-M2's keys in its converter's order (TextModel's trunk, block_count
// first, then MiniMaxM2Model's): minimax-m2 writes these, minimax-m3 these and its own.
void add_minimax_metadata(gguf::GgufWriter& w, const std::string& arch, const Shape& s, uint32_t head_dim,
                          uint32_t rope_dim);

Architecture* find_architecture(const std::string& name);  // nullptr if unknown
std::vector<Architecture*> all_architectures();
std::string architecture_names();  // "llama, ..." for messages

struct ArchitectureRegistrar {
  explicit ArchitectureRegistrar(std::unique_ptr<Architecture> arch);
};

}  // namespace ns::make_model
