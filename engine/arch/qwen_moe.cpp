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

class QwenMoe final : public Architecture {
 public:
  QwenMoe(const Hparams& hp, TensorLoader& t) : hp_(hp), rope_(rope_params(hp)) {
    const bool qwen3 = hp.arch == "qwen3moe";
    if (!hp.is_moe()) throw Error(ErrorKind::bad_model, hp.arch + ": expert_count is missing (every layer is MoE)");
    if (hp.rope_dim != hp.head_dim)
      throw Error(ErrorKind::bad_model, hp.arch + ": rope.dimension_count " + std::to_string(hp.rope_dim) +
                                            " must equal the head size " + std::to_string(hp.head_dim));
    const int64_t d = hp.n_embd, hd = hp.head_dim, q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
    shexp_width_ = hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      QwenLayer L;
      L.attn_norm = t.vector(p + "attn_norm.weight", d);
      L.attn.wq = t.matrix(p + "attn_q.weight", q_dim, d);
      L.attn.wk = t.matrix(p + "attn_k.weight", kv_dim, d);
      L.attn.wv = t.matrix(p + "attn_v.weight", kv_dim, d);
      L.attn.wo = t.matrix(p + "attn_output.weight", d, q_dim);
      L.extras.bq = t.vector_if_present(p + "attn_q.bias", q_dim);
      L.extras.bk = t.vector_if_present(p + "attn_k.bias", kv_dim);
      L.extras.bv = t.vector_if_present(p + "attn_v.bias", kv_dim);
      if (qwen3) {
        L.extras.q_norm = t.vector(p + "attn_q_norm.weight", hd);
        L.extras.k_norm = t.vector(p + "attn_k_norm.weight", hd);
      }
      L.ffn_norm = t.vector(p + "ffn_norm.weight", d);
      L.moe = load_moe(t, p, hp);
      // The reference fixes these per architecture whatever the metadata says.
      L.moe.gating = ExpertGating::softmax;
      L.moe.normalize_weights = qwen3;
      L.moe.selection_bias.clear();
      if (!qwen3) {
        if (shexp_width_ <= 0)
          throw Error(ErrorKind::bad_model, "qwen2moe: expert_shared_feed_forward_length and feed_forward_length are missing");
        L.moe.has_shared = true;
        L.moe.shared.gate = t.matrix(p + "ffn_gate_shexp.weight", shexp_width_, d);
        L.moe.shared.up = t.matrix(p + "ffn_up_shexp.weight", shexp_width_, d);
        L.moe.shared.down = t.matrix(p + "ffn_down_shexp.weight", d, shexp_width_);
        L.moe.shared_gate_inp = t.vector(p + "ffn_gate_inp_shexp.weight", d);
      }
      layers_.push_back(std::move(L));
    }
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = b.att = hp_.n_head * hp_.head_dim;
    b.k = b.v = b.cache.k_dim = b.cache.v_dim = hp_.n_head_kv * hp_.head_dim;
    b.ff = std::max(hp_.n_ff_expert, hp_.arch == "qwen2moe" ? shexp_width_ : 0);
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const QwenLayer& L = layers_[static_cast<size_t>(il)];
    pre_norm_residual(s, L.attn_norm, hp_.n_embd, hp_.rms_eps,
                      [&] { gqa_attention(L.attn, L.extras, hp_, rope_, il, s); });
    pre_norm_residual(s, L.ffn_norm, hp_.n_embd, hp_.rms_eps, [&] { moe_ffn(L.moe, s); });
  }

 private:
  Hparams hp_;
  RopeParams rope_;
  int64_t shexp_width_ = 0;
  std::vector<QwenLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<QwenMoe>(hp, loader);
}

}  // namespace ns
