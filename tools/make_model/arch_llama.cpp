// llama: dense (Llama 2/3 layout) or Mixtral-style MoE when --n-expert > 0.
// Metadata as llama.cpp's converter writes it (src/llama-arch.cpp,
// src/llama-model.cpp; compare ../shared/models/tiny-*.gguf); the tensors are
// engine/arch/llama.cpp's table.
#include <string>

#include "common/error.h"
#include "tools/make_model/architecture.h"
#include "engine/spec/metadata_keys.h"

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
      bad("--n-head " + std::to_string(s.n_head) + " is not a multiple of --n-head-kv " + std::to_string(s.n_head_kv));
    if (s.n_expert == 0 && s.n_expert_used != 0) bad("--n-expert-used needs --n-expert");
    if (s.n_expert > 0 && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert))
      bad("--n-expert " + std::to_string(s.n_expert) + " needs --n-expert-used between 1 and " +
          std::to_string(s.n_expert) + " (experts per token, e.g. 2)");
    if (!(s.rope_base > 0)) bad("--rope-base must be positive");
  }

  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override {
    using namespace gguf;
    const std::string a = "llama.";
    add_trunk_metadata(w, "llama", s, s.n_layer, s.n_head_kv);
    w.set(a + keys::rope_dimension_count, val::u32(s.n_embd / s.n_head));
    w.set(a + keys::vocab_size, val::u32(s.n_vocab));
    if (s.n_expert > 0) {
      w.set(a + keys::expert_count, val::u32(s.n_expert));
      w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
    }
  }
};

const ArchitectureRegistrar kRegister(std::make_unique<LlamaArchitecture>());

}  // namespace
}  // namespace ns::make_model
