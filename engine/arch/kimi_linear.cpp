// kimi-linear: Kimi Linear (48B-A3B), a hybrid of Kimi Delta Attention and
// MLA layers (llama.cpp's src/models/kimi-linear.cpp, 2026-09-28). A layer is
//   x += kda(rms_norm(x) * attn_norm)     where attention.head_count_kv[il] == 0
//     or mla(rms_norm(x) * attn_norm)     elsewhere: MLA without any RoPE (the
//                                         KDA layers carry the positions)
//   x += ffn(rms_norm(x) * ffn_norm)      DeepSeek's pattern: dense leading
//                                         layers, then sigmoid-routed experts with a
//                                         selection bias plus shared experts
// Quirks owned here: the reference always renormalizes the chosen experts'
// weights for this architecture (whatever expert_weights_norm says), and its
// MLA layers never rotate.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/arch/kimi_linear.h"
#include "engine/layers/ffn.h"
#include "engine/layers/kda.h"
#include "engine/layers/mla_attention.h"
#include "engine/layers/residual.h"
#include "engine/ops.h"
#include "engine/util/error.h"

namespace ns {
namespace {

struct KimiLinearLayer {
  std::vector<float> attn_norm, ffn_norm;
  bool recurrent = false;
  KdaWeights kda;  // recurrent layers
  MlaWeights mla;  // the others
  DeepseekFfn ffn;
};

Hparams with_quirks(Hparams hp) {
  hp.expert_weights_norm = true;
  return hp;
}

class KimiLinear final : public Architecture {
 public:
  KimiLinear(const Hparams& hp, TensorLoader& t, bool expanded_cache)
      : hp_(with_quirks(hp)), kda_(kda_shape(hp)), mla_(mla_shape(hp)) {
    const int64_t d = hp.n_embd;
    mla_.rotary = false;
    mla_.expanded_cache = expanded_cache && !t.has("blk." + std::to_string(first_mla_layer()) + ".attn_k_b.weight");
    if (hp.n_head_kv_layers.empty())
      throw Error(ErrorKind::bad_model, "kimi-linear: attention.head_count_kv must list each layer (0 for the KDA "
                                        "layers); the file gives one number for all");
    if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
      throw Error(ErrorKind::bad_model, "kimi-linear: expert_count is missing but layers " +
                                            std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
    int64_t n_kda = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      KimiLinearLayer L;
      L.attn_norm = t.vector(p + "attn_norm.weight", d);
      L.recurrent = hp.head_count_kv(il) == 0;
      if (L.recurrent) {
        L.kda = load_kda(t, p, kda_, d);
        ++n_kda;
      } else {
        L.mla = load_mla(t, p, mla_, d);
      }
      L.ffn_norm = t.vector(p + "ffn_norm.weight", d);
      L.ffn = load_deepseek_ffn(t, p, hp_, il);
      layers_.push_back(std::move(L));
    }
    spdlog::info("kimi-linear: {} KDA layers (state {} floats per sequence each), {} MLA layers", n_kda,
                 kda_.conv_floats() + kda_.state_floats(), hp.n_layer - n_kda);
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = std::max(mla_q_width(mla_), kda_.q_width());
    b.k = std::max({mla_k_width(mla_), kda_.q_width(), kda_scratch_u16(kda_)});
    b.v = std::max(mla_v_width(mla_), kda_.q_width());
    b.att = std::max(mla_att_width(mla_), kda_.att_width());
    b.ff = deepseek_ffn_width(hp_);
    b.cache.k_dim = mla_.cache_k_width();
    b.cache.v_dim = mla_.cache_v_width();
    b.cache.conv_floats = kda_.conv_floats();
    b.cache.state_floats = kda_.state_floats();
    for (int64_t il = 0; il < hp_.n_layer; ++il) b.cache.attends.push_back(hp_.head_count_kv(il) != 0);
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const KimiLinearLayer& L = layers_[static_cast<size_t>(il)];
    pre_norm_residual(s, L.attn_norm, hp_.n_embd, hp_.rms_eps, [&] {
      if (L.recurrent)
        kda_attention(L.kda, kda_, il, s);
      else
        mla_attention(L.mla, mla_, il, s);
    });
    pre_norm_residual(s, L.ffn_norm, hp_.n_embd, hp_.rms_eps, [&] { deepseek_ffn(L.ffn, s); });
  }

 private:
  int64_t first_mla_layer() const {
    for (int64_t il = 0; il < hp_.n_layer; ++il)
      if (hp_.head_count_kv(il) != 0) return il;
    return 0;
  }

  Hparams hp_;
  KdaShape kda_;
  MlaShape mla_;
  std::vector<KimiLinearLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_kimi_linear(const Hparams& hp, TensorLoader& loader, bool expanded_cache) {
  return std::make_unique<KimiLinear>(hp, loader, expanded_cache);
}

}  // namespace ns
