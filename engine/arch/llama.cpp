// llama: dense (Llama 2/3) and Mixtral-style MoE. A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn_or_moe(rms_norm(x) * ffn_norm)
#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/arch/llama.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/spec/tensor_table.h"
#include "engine/state/ops.h"
#include "common/error.h"

namespace ns {
namespace {

struct LlamaLayer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  FfnWeights ffn;  // dense layers
  MoeWeights moe;  // MoE layers
  bool is_moe = false;
};

// Every tensor of a llama file's blocks, bound to `layers` (one per block).
void describe(const Hparams& hp, TensorTable& t, std::vector<LlamaLayer>& layers) {
  const int64_t d = hp.n_embd;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t, const std::string& p, LlamaLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    gqa_tensors(t, p, hp, L.attn);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    L.is_moe = hp.is_moe();
    if (L.is_moe) {
      moe_tensors(t, p, hp, L.moe, MoeBiases::none());
      L.moe.normalize_weights = true;  // Mixtral renormalizes the top-k softmax weights
      L.moe.gating = ExpertGating::softmax;
    } else {
      ffn_tensors(t, p, "", hp.n_ff, d, L.ffn);
    }
  });
}

class Llama final : public LayerStack<LlamaLayer> {
 public:
  Llama(const Hparams& hp, TensorLoader& t) : LayerStack(hp) { load_layers(describe, hp, t, layers_); }

  BufferSizes buffer_sizes() const override { return gqa_buffer_sizes(hp_, hp_.is_moe() ? hp_.n_ff_expert : hp_.n_ff); }

 private:
  void attention(const LlamaLayer& L, int64_t il, ForwardState& s) const override { gqa_attention(L.attn, hp_, il, s); }
  void ffn(const LlamaLayer& L, ForwardState& s) const override {
    if (L.is_moe)
      moe_ffn(L.moe, s);
    else
      gated_ffn(L.ffn, s.xn.data(), s.n, s.ff_a.data(), s.ff_b.data(), s.out.data(), s);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const Hparams& hp, TensorLoader& loader) {
  // The layer rotates with ops::rope, which takes no YaRN parameters.
  if (hp.rope_scaling == RopeScaling::yarn)
    throw Error(ErrorKind::bad_model,
                "llama: YaRN rope scaling (llama.rope.scaling.type = yarn) is not supported "
                "for this architecture yet (supported: none, linear)");
  return std::make_unique<Llama>(hp, loader);
}

void llama_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// No quirks: norm rope, softmax gating, experts feed_forward_length wide.
const ArchTraits llama_traits = {};

}  // namespace ns
