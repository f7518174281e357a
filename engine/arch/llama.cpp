// llama: dense (Llama 2/3) and Mixtral-style MoE. A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn_or_moe(rms_norm(x) * ffn_norm)
#include <string>
#include <vector>

#include "engine/arch/llama.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/residual.h"
#include "engine/ops.h"

namespace ns {
namespace {

struct LlamaLayer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  FfnWeights ffn;   // dense layers
  MoeWeights moe;   // MoE layers
  bool is_moe = false;
};

class Llama final : public Architecture {
 public:
  Llama(const Hparams& hp, TensorLoader& t) : hp_(hp) {
    const int64_t d = hp.n_embd, q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      LlamaLayer L;
      L.attn_norm = t.vector(p + "attn_norm.weight", d);
      L.attn.wq = t.matrix(p + "attn_q.weight", q_dim, d);
      L.attn.wk = t.matrix(p + "attn_k.weight", kv_dim, d);
      L.attn.wv = t.matrix(p + "attn_v.weight", kv_dim, d);
      L.attn.wo = t.matrix(p + "attn_output.weight", d, q_dim);
      L.ffn_norm = t.vector(p + "ffn_norm.weight", d);
      if (hp.is_moe()) {
        L.is_moe = true;
        L.moe.layer = il;
        L.moe.router = t.matrix(p + "ffn_gate_inp.weight", hp.n_expert, d);
        L.moe.gate = t.experts(p + "ffn_gate_exps.weight", hp.n_expert, hp.n_ff_expert, d);
        L.moe.up = t.experts(p + "ffn_up_exps.weight", hp.n_expert, hp.n_ff_expert, d);
        L.moe.down = t.experts(p + "ffn_down_exps.weight", hp.n_expert, d, hp.n_ff_expert);
        L.moe.n_used = hp.n_expert_used;
        L.moe.normalize_weights = true;  // Mixtral renormalizes the top-k softmax weights
        L.moe.gating = ExpertGating::softmax;
      } else {
        L.ffn.gate = t.matrix(p + "ffn_gate.weight", hp.n_ff, d);
        L.ffn.up = t.matrix(p + "ffn_up.weight", hp.n_ff, d);
        L.ffn.down = t.matrix(p + "ffn_down.weight", d, hp.n_ff);
      }
      layers_.push_back(std::move(L));
    }
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = b.att = hp_.n_head * hp_.head_dim;
    b.k = b.v = b.cache.k_dim = b.cache.v_dim = hp_.n_head_kv * hp_.head_dim;
    b.ff = hp_.is_moe() ? hp_.n_ff_expert : hp_.n_ff;
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const LlamaLayer& L = layers_[static_cast<size_t>(il)];
    pre_norm_residual(s, L.attn_norm, hp_.n_embd, hp_.rms_eps, [&] { gqa_attention(L.attn, hp_, il, s); });
    pre_norm_residual(s, L.ffn_norm, hp_.n_embd, hp_.rms_eps, [&] {
      if (L.is_moe)
        moe_ffn(L.moe, s);
      else
        gated_ffn(L.ffn, s.xn.data(), s.n, s.ff_a.data(), s.ff_b.data(), s.out.data(), s);
    });
  }

 private:
  Hparams hp_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<Llama>(hp, loader);
}

}  // namespace ns
