#include "engine/arch/kimi_hybrid.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/ops.h"
#include "common/error.h"

namespace ns {

KimiHybrid::KimiHybrid(const std::string& name, const Hparams& hp, TensorLoader& t, bool expanded_cache)
    : hp_(hp), kda_(kda_shape(hp)), mla_(mla_shape(hp)) {
  const int64_t d = hp.n_embd;
  if (hp.n_head_kv_layers.empty())
    throw Error(ErrorKind::bad_model, name + ": attention.head_count_kv must list each layer (0 for the KDA "
                                             "layers); the file gives one number for all");
  if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
    throw Error(ErrorKind::bad_model, name + ": expert_count is missing but layers " +
                                          std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
  int64_t first_mla = -1, n_kda = 0;
  for (int64_t il = 0; il < hp.n_layer && first_mla < 0; ++il)
    if (hp.head_count_kv(il) != 0) first_mla = il;
  mla_.rotary = false;
  mla_.expanded_cache =
      expanded_cache && first_mla >= 0 && !t.has("blk." + std::to_string(first_mla) + ".attn_k_b.weight");
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Layer L;
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
  spdlog::info("{}: {} KDA layers (state {} floats per sequence each), {} MLA layers", name, n_kda,
               kda_.conv_floats() + kda_.state_floats(), hp.n_layer - n_kda);
}

BufferSizes KimiHybrid::buffer_sizes() const {
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

void KimiHybrid::norm(const float* in, const std::vector<float>& w, ForwardState& s) const {
  const int64_t d = hp_.n_embd;
  for (int64_t t = 0; t < s.n; ++t) ops::rms_norm(&in[t * d], w.data(), d, hp_.rms_eps, &s.xn[t * d]);
}

void KimiHybrid::attention(int64_t il, ForwardState& s) const {
  const Layer& L = layers_[static_cast<size_t>(il)];
  if (L.recurrent)
    kda_attention(L.kda, kda_, il, s);
  else
    mla_attention(L.mla, mla_, il, s);
}

void KimiHybrid::ffn(int64_t il, ForwardState& s) const { deepseek_ffn(layers_[static_cast<size_t>(il)].ffn, s); }

}  // namespace ns
