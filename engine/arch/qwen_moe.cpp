// qwen2moe (Qwen1.5/Qwen2-MoE) and qwen3moe (Qwen3 MoE). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += moe(rms_norm(x) * ffn_norm)
// with GQA attention and NEOX RoPE. qwen2moe: Q/K/V biases, routed weights
// not renormalized, plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp · x).
// qwen3moe: per-head RMS norms of Q and K before RoPE (attn_q_norm,
// attn_k_norm), no biases, routed weights renormalized, no shared expert.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/arch/qwen_moe.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "common/error.h"

namespace ns {
namespace {

struct QwenLayer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  GqaExtras extras;  // qwen2moe: Q/K/V biases; qwen3moe: Q/K norms
  MoeWeights moe;
};

// Every tensor of a qwen2moe/qwen3moe file's blocks, bound to `layers` (one per block).
void describe(const Hparams& hp, TensorTable& t, std::vector<QwenLayer>& layers) {
  const bool qwen3 = hp.arch == "qwen3moe";
  if (!hp.is_moe()) throw Error(ErrorKind::bad_model, hp.arch + ": expert_count is missing (every layer is MoE)");
  if (!qwen3 && qwen_shexp_width(hp) <= 0)
    throw Error(ErrorKind::bad_model,
                "qwen2moe: expert_shared_feed_forward_length and feed_forward_length are missing");
  const int64_t d = hp.n_embd, hd = hp.head_dim;
  // qwen2moe files carry Q/K/V biases; the loader takes them from any file that has them.
  const Presence biases = qwen3 ? Presence::tolerated : Presence::optional;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t, const std::string& p, QwenLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    gqa_tensors(t, p, hp, L.attn, &L.extras, biases);
    if (qwen3) {
      t.vector(p + "attn_k_norm.weight", hd, R::norm, &L.extras.k_norm);
      t.vector(p + "attn_q_norm.weight", hd, R::norm, &L.extras.q_norm);
    }
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    qwen_moe_ffn_tensors(t, p, hp, {.normalize = qwen3, .shared_expert = !qwen3}, L.moe);
  });
}

class QwenMoe final : public GqaLayerStack<QwenLayer> {
 public:
  QwenMoe(const Hparams& hp, TensorLoader& t) : GqaLayerStack(hp) {
    if (hp.rope_dim != hp.head_dim)
      throw Error(ErrorKind::bad_model, hp.arch + ": rope.dimension_count " + std::to_string(hp.rope_dim) +
                                            " must equal the head size " + std::to_string(hp.head_dim));
    load_layers(describe, hp, t, layers_);
  }

  BufferSizes buffer_sizes() const override {
    return gqa_buffer_sizes(hp_, std::max(hp_.n_ff_expert, hp_.arch == "qwen2moe" ? qwen_shexp_width(hp_) : 0));
  }

 private:
  void ffn(const QwenLayer& L, ForwardState& s) const override { moe_ffn(L.moe, s); }
};

}  // namespace

int64_t qwen_shexp_width(const Hparams& hp) { return hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff; }

void qwen_moe_ffn_tensors(TensorTable& t, const std::string& p, const Hparams& hp, QwenMoeFfn form, MoeWeights& moe) {
  moe_tensors(t, p, hp, moe, MoeBiases::none());
  // The reference fixes these per architecture whatever the metadata says.
  moe.gating = ExpertGating::softmax;
  moe.normalize_weights = form.normalize;
  if (form.shared_expert) gated_shared_expert_tensors(t, p, qwen_shexp_width(hp), hp.n_embd, moe);
}

std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<QwenMoe>(hp, loader);
}

void qwen_moe_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// qwen2moe and qwen3moe: NEOX rope; without expert_feed_forward_length each
// expert is feed_forward_length / expert_used_count wide, as the reference sizes it.
const ArchTraits qwen_moe_traits = {.rope_type = RopeType::neox, .split_n_ff = true};

}  // namespace ns
