#include "engine/arch/kimi_hybrid.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/state/ops.h"
#include "common/error.h"

namespace ns {
namespace {

// The limits block il's FFN has (KimiForm::silu_clamps), on top of its activations.
void clamp_swiglu(const Hparams& hp, int64_t il, DeepseekFfn& f) {
  const auto limit = [&](const std::vector<float>& limits, FfnActivation& act) {
    const float l = limits.empty() ? 0.0f : limits[static_cast<size_t>(il)];
    if (l <= 1e-6f) return;  // the reference's threshold
    act.kind = FfnActivation::Kind::silu_clamp;
    act.limit = l;
  };
  if (!f.is_moe) {
    limit(hp.swiglu_clamp_shexp, f.dense.act);
    return;
  }
  limit(hp.swiglu_clamp_exp, f.moe.act);
  if (f.moe.has_shared) limit(hp.swiglu_clamp_shexp, f.moe.shared.act);
}

}  // namespace

void describe_kimi(const KimiForm& form, const Hparams& hp, TensorTable& t, KimiWeights& w) {
  const std::string name = form.name;
  if (hp.n_head_kv_layers.empty())
    throw Error(ErrorKind::bad_model, name +
                                          ": attention.head_count_kv must list each layer (0 for the KDA "
                                          "layers); the file gives one number for all");
  if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
    throw Error(ErrorKind::bad_model, name + ": expert_count is missing but layers " +
                                          std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
  const int64_t d = hp.n_embd;
  const bool scores = form.residual_scores && hp.attn_res_block_size > 0;
  using R = TensorRole;
  MlaShape mla = mla_shape(hp);
  mla.per_head_gate = form.mla_head_gate;
  const KdaShape kda = kda_shape(hp);
  const int64_t shared = form.shared_width ? form.shared_width(hp) : -1;
  if (scores) t.vector("output_res_score.weight", d, R::score, &w.output_res_score);
  describe_blocks(hp, t, w.layers, [&](int64_t il, const std::string& p, KimiLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    if (scores) {
      t.vector(p + "attn_res_score.weight", d, R::score, &L.attn_res_score);
      t.vector(p + "ffn_res_score.weight", d, R::score, &L.ffn_res_score);
    }
    L.recurrent = hp.head_count_kv(il) == 0;
    if (L.recurrent)
      kda_tensors(t, p, kda, d, form.kda, L.kda);
    else
      mla_tensors(t, p, mla, d, form.mla_layout, form.mla_gate, L.mla);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    deepseek_ffn_tensors(t, p, hp, il, L.ffn, Presence::optional, shared);
    if (form.silu_clamps) clamp_swiglu(hp, il, L.ffn);
    if (form.nextn_tensors && il >= hp.n_layer) {
      t.matrix(p + "nextn.eh_proj.weight", d, 2 * d, R::input, nullptr);
      for (const char* norm : {"nextn.enorm", "nextn.hnorm", "layer_output_norm"})
        t.vector(p + norm + ".weight", d, R::norm, nullptr);
    }
  });
}

void kimi_hybrid_tensors(const KimiForm& form, const Hparams& hp, TensorTable& t) {
  KimiWeights dropped;
  describe_kimi(form, hp, t, dropped);
  t.unbind();
}

KimiHybrid::KimiHybrid(const KimiForm& form, const Hparams& hp, TensorLoader& t, const ArchOptions& o)
    : hp_(hp), kda_(kda_shape(hp)), mla_(mla_shape(hp)), shared_width_(form.shared_width ? form.shared_width(hp) : -1) {
  TensorTable table;
  describe_kimi(form, hp_, table, w_);
  table.load(t);
  int64_t first_mla = -1, n_kda = 0;
  for (int64_t il = 0; il < hp.n_layer && first_mla < 0; ++il)
    if (hp.head_count_kv(il) != 0) first_mla = il;
  mla_.rotary = form.mla_rotary;
  mla_.per_head_gate = form.mla_head_gate;
  mla_.expanded_cache = o.mla_expanded_cache && first_mla >= 0 && !t.has(block_prefix(first_mla) + "attn_k_b.weight");
  mla_.expand_prefill = o.mla_expand_prefill;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    KimiLayer& L = w_.layers[static_cast<size_t>(il)];
    if (L.recurrent) {
      finish_kda(L.kda, form.kda);
      ++n_kda;
    } else
      finish_mla(L.mla, mla_, block_prefix(il));
  }
  spdlog::info("{}: {} KDA layers (state {} floats per sequence each), {} MLA layers", form.name, n_kda,
               kda_.conv_floats() + kda_.state_floats(), hp.n_layer - n_kda);
}

BufferSizes KimiHybrid::buffer_sizes() const {
  BufferSizes b;
  b.q = std::max(mla_q_width(mla_), kda_.q_width());
  b.k = std::max({mla_k_width(mla_), kda_.q_width(), kda_scratch_u16(kda_)});
  b.v = std::max(mla_v_width(mla_), kda_.q_width());
  b.att = std::max(mla_att_width(mla_), kda_.att_width());
  b.ff = deepseek_ffn_width(hp_, shared_width_);
  b.cache.k_dim = mla_.cache_k_width();
  b.cache.v_dim = mla_.cache_v_width();
  b.cache.conv_floats = kda_.conv_floats();
  b.cache.state_floats = kda_.state_floats();
  for (int64_t il = 0; il < hp_.n_layer; ++il) b.cache.attends.push_back(hp_.head_count_kv(il) != 0);
  return b;
}

uint64_t KimiHybrid::context_scratch(int64_t keys, int64_t queries, ForwardState* s) const {
  std::vector<const MlaWeights*> mla;
  for (const KimiLayer& L : w_.layers)
    if (!L.recurrent) mla.push_back(&L.mla);
  return mla_context_scratch(mla_, mla, keys, queries, s);
}

void KimiHybrid::norm(const float* in, const std::vector<float>& w, ForwardState& s) const {
  const int64_t d = hp_.n_embd;
  for (int64_t t = 0; t < s.n; ++t) ops::rms_norm(&in[t * d], w.data(), d, hp_.rms_eps, &s.xn[t * d]);
}

void KimiHybrid::attention(int64_t il, ForwardState& s) const {
  const KimiLayer& L = w_.layers[static_cast<size_t>(il)];
  if (L.recurrent)
    kda_attention(L.kda, kda_, il, s);
  else
    mla_attention(L.mla, mla_, il, s);
}

void KimiHybrid::ffn(int64_t il, ForwardState& s) const { deepseek_ffn(w_.layers[static_cast<size_t>(il)].ffn, s); }

const ArchTraits kimi_hybrid_traits = {};

}  // namespace ns
