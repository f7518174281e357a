// qwen3moe (Qwen3 MoE: per-head Q/K RMS norms, no biases, head size from
// --head-dim) and qwen2moe (Qwen1.5/Qwen2 MoE: Q/K/V biases, a shared expert
// of width --n-ff-shexp behind a sigmoid gate ffn_gate_inp_shexp). Every
// layer is MoE; --n-ff is the routed experts' width. Metadata as llama.cpp's
// converter writes it (src/llama-arch.cpp, src/models/qwen2moe.cpp,
// qwen3moe.cpp); the tensors are engine/arch/qwen_moe.cpp's table.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

struct QwenFlags {
  uint32_t head_dim = 0;      // qwen3moe: 0 = n_embd / n_head
  uint32_t n_ff_shexp = 128;  // qwen2moe shared expert width
};

// One flag set for both variants.
QwenFlags& flags() { return shared_flags<QwenFlags>(); }

class QwenMoeArchitecture : public Architecture {
 public:
  explicit QwenMoeArchitecture(bool qwen3) : qwen3_(qwen3) {}
  std::string name() const override { return qwen3_ ? "qwen3moe" : "qwen2moe"; }

  void add_flags(CLI::App& app) override {
    if (qwen3_) {
      add_arch_option(app, "qwen3moe", "--head-dim", flags().head_dim,
                      "qwen3moe: attention head size (0: n_embd / n_head)");
    } else {
      add_arch_option(app, "qwen2moe", "--n-ff-shexp", flags().n_ff_shexp, "qwen2moe: shared expert width");
    }
  }

  void validate(const Shape& s) const override {
    validate_moe_shape(s, name());
    auto bad = [this](const std::string& m) { throw Error(ErrorKind::invalid_input, name() + ": " + m); };
    if (head_dim(s) == 0 || head_dim(s) % 2) bad("the head size must be a positive even number");
    if (!qwen3_ && s.n_embd % s.n_head != 0) bad("--n-embd must be a multiple of --n-head");
    if (!qwen3_ && flags().n_ff_shexp == 0) bad("--n-ff-shexp must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const std::string a = name() + ".";
    add_trunk_metadata(w, name(), s, s.n_layer, s.n_head_kv);
    w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    if (qwen3_) {
      w.set(a + keys::attention_key_length, val::u32(head_dim(s)));
      w.set(a + keys::attention_value_length, val::u32(head_dim(s)));
    }
    w.set(a + keys::expert_count, val::u32(s.n_expert));
    w.set(a + keys::expert_feed_forward_length, val::u32(s.n_ff));
    if (!qwen3_) w.set(a + keys::expert_shared_feed_forward_length, val::u32(flags().n_ff_shexp));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
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
