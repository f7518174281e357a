// One file per architecture: each describes its tensors once, in a table
// (engine/spec/tensor_table.h) that its loader, the memory plan and
// nightshift-make-model read, and computes one transformer layer over a batch.
// Its quirks are settings it fills (ArchTraits, engine/spec/hparams.h), not
// branches on its name in shared code. Adding one: its file, its tests and one
// line in registry.cpp.
// Embedding lookup, the final norm and the output head are shared (model.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/state/forward_state.h"
#include "engine/spec/hparams.h"
#include "common/error.h"
#include "engine/spec/tensor_loader.h"
#include "engine/spec/tensor_table.h"
#include "engine/state/sequence_state.h"

namespace ns {

class Architecture {
 public:
  virtual ~Architecture() = default;
  // s.x -> s.x through layer il.
  virtual void layer(int64_t il, ForwardState& s) = 0;
  // s.x -> s.x after the last layer, before the output norm (kimi-k3's final
  // residual mix); most architectures have nothing to do here.
  virtual void before_output(ForwardState& s) { (void)s; }
  virtual BufferSizes buffer_sizes() const = 0;
  // Bytes of the ForwardState scratch that grows with the context (MLA's
  // expanded chunks: forward_state.h, xp_*) for sequences of up to `keys`
  // tokens in forward passes of up to `queries`; allocated into *s when s is
  // not null. Called for the memory plan, then once to allocate.
  virtual uint64_t context_scratch(int64_t keys, int64_t queries, ForwardState* s) const {
    (void)keys, (void)queries, (void)s;
    return 0;
  }
};

// Choices the model file leaves open, made when it is loaded.
struct ArchOptions {
  // deepseek2 files with the fused attn_kv_b tensor: false caches the latent
  // (kv_lora_rank + rope dims per token and layer, as for split files); true
  // caches expanded keys and values as the reference implementation does for
  // such files, so that its logits are matched exactly (more memory).
  bool mla_expanded_cache = false;
  // MLA prompt chunks long enough to pay for it attend over keys and values
  // expanded from the latents (mla_expand_run: up to 1.38x prefill on
  // DeepSeek-V2-Lite, docs/performance.md). Off: every chunk takes the
  // reference's absorbed path, so a position's logits are the same bits
  // whatever chunk it is in and whatever follows it (causality, prefix
  // sharing, a resumed job's replay); on, they differ by float order, and a
  // near-tie expert choice can turn that into a different token.
  bool mla_expand_prefill = false;
};

// Throws ns::Error(bad_model) for architectures this build does not run.
std::unique_ptr<Architecture> make_architecture(const Hparams& hp, TensorLoader& loader,
                                                const ArchOptions& options = {});

// Every tensor of a file of hp.arch, unbound (engine/spec/tensor_table.h):
// the output head (without output.weight when tied_output), then the blocks,
// in the converter's file order. nightshift-make-model writes what this lists.
// Throws ns::Error(bad_model) for an architecture this build does not run.
TensorTable tensor_table(const Hparams& hp, bool tied_output);

// Architectures known to this build, for messages.
const char* supported_architectures();
// Whether `arch` (general.architecture) is one of supported_architectures().
bool architecture_supported(const std::string& arch);
// The bad_model error for an architecture this build does not run, naming it
// and the supported ones; `where` (a file) prefixes the message when given.
Error unsupported_architecture(const std::string& arch, const std::string& where = "");
// The file's hyperparameters (Hparams::from_gguf), once this build is known to
// run its architecture: every other key is named after the architecture, so for
// one it does not run the first of them would be reported missing instead of
// the reason. The one way the engine reads a file's Hparams.
Hparams read_hparams(const gguf::GgufFile& f);

}  // namespace ns
