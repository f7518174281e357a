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

#include "engine/arch/qwen_moe.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/residual.h"
#include "engine/layers/yarn_rope.h"
#include "common/error.h"

namespace ns {
namespace {

struct QwenLayer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  GqaExtras extras;  // qwen2moe: Q/K/V biases; qwen3moe: Q/K norms
  MoeWeights moe;
};

// The shared expert's width (qwen2moe).
int64_t shexp_width(const Hparams& hp) { return hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff; }

// Every tensor of a qwen2moe/qwen3moe file's blocks, bound to `layers` (one per block).
void describe(const Hparams& hp, TensorTable& t, std::vector<QwenLayer>& layers) {
  const bool qwen3 = hp.arch == "qwen3moe";
  if (!hp.is_moe()) throw Error(ErrorKind::bad_model, hp.arch + ": expert_count is missing (every layer is MoE)");
  if (!qwen3 && shexp_width(hp) <= 0)
    throw Error(ErrorKind::bad_model, "qwen2moe: expert_shared_feed_forward_length and feed_forward_length are missing");
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
    moe_tensors(t, p, hp, L.moe, MoeBiases::none());
    // The reference fixes these per architecture whatever the metadata says.
    L.moe.gating = ExpertGating::softmax;
    L.moe.normalize_weights = qwen3;
    if (!qwen3) gated_shared_expert_tensors(t, p, shexp_width(hp), d, L.moe);
  });
}

class QwenMoe final : public Architecture {
 public:
  QwenMoe(const Hparams& hp, TensorLoader& t) : hp_(hp), rope_(rope_params(hp)) {
    if (hp.rope_dim != hp.head_dim)
      throw Error(ErrorKind::bad_model, hp.arch + ": rope.dimension_count " + std::to_string(hp.rope_dim) +
                                            " must equal the head size " + std::to_string(hp.head_dim));
    load_layers(describe, hp, t, layers_);
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = b.att = hp_.n_head * hp_.head_dim;
    b.k = b.v = b.cache.k_dim = b.cache.v_dim = hp_.n_head_kv * hp_.head_dim;
    b.ff = std::max(hp_.n_ff_expert, hp_.arch == "qwen2moe" ? shexp_width(hp_) : 0);
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const QwenLayer& L = layers_[static_cast<size_t>(il)];
    attention_ffn_layer(
        s, L.attn_norm, L.ffn_norm, hp_.n_embd, hp_.rms_eps,
        [&] { gqa_attention(L.attn, L.extras, hp_, rope_, il, s); }, [&] { moe_ffn(L.moe, s); });
  }

 private:
  Hparams hp_;
  RopeParams rope_;
  std::vector<QwenLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<QwenMoe>(hp, loader);
}

void qwen_moe_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

}  // namespace ns
