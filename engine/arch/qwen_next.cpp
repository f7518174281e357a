// qwen3next (Qwen3-Next) and qwen35moe (Qwen3.5 MoE): hybrids of Gated
// DeltaNet and gated full-attention layers over routed experts plus a gated
// shared expert (llama.cpp's src/models/qwen3next.cpp and qwen35moe.cpp,
// 2026-09-28). A layer is
//   x += gdn(rms_norm(x) * attn_norm)        where the layer is recurrent
//     or attn(rms_norm(x) * attn_norm)       elsewhere: every
//                                            full_attention_interval-th layer
//                                            (or attention.recurrent_layers)
//   x += moe(rms_norm(x) * post_attention_norm)
// attn: attn_q yields per head [query | gate]; per-head RMS norms of Q and K,
// RoPE on the first rope.dimension_count dims (neox; qwen35moe: imrope with
// rope.dimension_sections), GQA softmax attention over the F16 cache, times
// sigmoid(gate), then attn_output.
// moe: softmax routing, chosen weights renormalized (the reference fixes this
// for both), plus the shared expert scaled by sigmoid(ffn_gate_inp_shexp · x).
// The two differ in the Gated DeltaNet layer's head broadcast and beta/alpha
// tensors (gated_delta_net.h) and the RoPE form. NextN (multi-token
// prediction) blocks the file carries are not layers here (Hparams drops
// them) and are never read.
#include "engine/arch/qwen_next.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/arch/qwen_moe.h"
#include "engine/gguf/gguf_file.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/gated_delta_net.h"
#include "engine/layers/yarn_rope.h"
#include "engine/state/ops.h"
#include "engine/state/sequence_state.h"
#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns {
namespace {

struct GatedAttention {
  kernels::MatrixView wq;  // [n_head * 2 hd][n_embd]: per head query then gate
  kernels::MatrixView wk, wv, wo;
  std::vector<float> q_norm, k_norm;  // [hd], shared by all heads
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;  // ffn_norm: post_attention_norm.weight
  bool recurrent = false;
  GdnWeights gdn;       // recurrent layers
  GatedAttention attn;  // the others
  MoeWeights moe;
};

// The keys only the hybrids have: which layers are recurrent (the layer
// pattern; n_layer already leaves out the NextN blocks) and the rope's
// sections (qwen35moe's imrope).
void read_hybrid_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  const std::string key = a + keys::attention_recurrent_layers;
  if (f.has(key)) {
    const std::vector<int32_t> flags = f.get_i32_array(key);
    // The converter appends entries for the NextN layers, which are never run.
    if (static_cast<int64_t>(flags.size()) < h.n_layer)
      bad_hparam(f, key,
                 "has " + std::to_string(flags.size()) + " entries, expected one per layer (" +
                     std::to_string(h.n_layer) + ")");
    for (int64_t il = 0; il < h.n_layer; ++il) h.recurrent_layers.push_back(flags[static_cast<size_t>(il)] != 0);
  } else {
    const uint64_t interval = f.get_u64_or(a + keys::full_attention_interval, 4);
    if (interval == 0) bad_hparam(f, a + keys::full_attention_interval, "is 0, expected a positive layer interval");
    for (int64_t il = 0; il < h.n_layer; ++il) h.recurrent_layers.push_back((il + 1) % interval != 0);
  }
  const std::string sections = a + keys::rope_dimension_sections;
  if (f.has(sections)) {
    const std::vector<int32_t> sec = f.get_i32_array(sections);
    if (sec.size() > 4) bad_hparam(f, sections, "has " + std::to_string(sec.size()) + " entries, expected 4");
    for (size_t i = 0; i < sec.size(); ++i) {
      if (sec[i] < 0) bad_hparam(f, sections, "has a negative entry");
      h.rope_sections[i] = sec[i];
    }
  }
}

// The Gated DeltaNet layers' shape, when the model has any; qwen35moe tiles
// its key heads over the value heads (h % n_k) and splits ssm_ba into
// ssm_beta and ssm_alpha.
GdnShape gdn_shape_if_any(const Hparams& hp) {
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (!hp.is_recurrent(il)) continue;
    GdnShape sh = gdn_shape(hp);
    sh.tiled_key_heads = sh.split_beta_alpha = hp.arch == "qwen35moe";
    return sh;
  }
  return {};
}

// Every tensor of a qwen3next/qwen35moe file's blocks, bound to `layers` (one
// per layer that runs); the NextN blocks after them (a full-attention block
// plus the nextn.* projections) are described but never read.
void describe(const Hparams& hp, TensorTable& t, std::vector<Layer>& layers) {
  const std::string& a = hp.arch;
  if (!hp.is_moe()) throw Error(ErrorKind::bad_model, a + ": expert_count is missing (every layer is MoE)");
  if (qwen_shexp_width(hp) <= 0)
    throw Error(ErrorKind::bad_model, a + ": expert_shared_feed_forward_length and feed_forward_length are missing");
  const GdnShape gdn = gdn_shape_if_any(hp);
  const int64_t d = hp.n_embd, hd = hp.head_dim, q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, Layer& L) {
    const bool nextn = il >= hp.n_layer;
    if (nextn) {
      t.matrix(p + "nextn.eh_proj.weight", d, 2 * d, R::input, nullptr);
      for (const char* norm : {"enorm", "hnorm", "shared_head_norm"})
        t.vector(p + "nextn." + norm + ".weight", d, R::norm, nullptr);
    }
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    L.recurrent = !nextn && hp.is_recurrent(il);
    if (L.recurrent) {
      gdn_tensors(t, p, gdn, d, L.gdn);
    } else {
      t.matrix(p + "attn_q.weight", 2 * q_dim, d, R::input, &L.attn.wq);
      t.matrix(p + "attn_k.weight", kv_dim, d, R::input, &L.attn.wk);
      t.matrix(p + "attn_v.weight", kv_dim, d, R::input, &L.attn.wv);
      t.matrix(p + "attn_output.weight", d, q_dim, R::residual, &L.attn.wo);
      t.vector(p + "attn_q_norm.weight", hd, R::norm, &L.attn.q_norm);
      t.vector(p + "attn_k_norm.weight", hd, R::norm, &L.attn.k_norm);
    }
    t.vector(p + "post_attention_norm.weight", d, R::norm, &L.ffn_norm);
    qwen_moe_ffn_tensors(t, p, hp, {.normalize = true, .shared_expert = true}, L.moe);
  });
}

class QwenNext final : public LayerStack<Layer> {
 public:
  QwenNext(const Hparams& hp, TensorLoader& t) : LayerStack(hp), rope_(rope_params(hp)), gdn_(gdn_shape_if_any(hp)) {
    const std::string& a = hp.arch;
    if (hp.head_dim_v != hp.head_dim)
      throw Error(ErrorKind::bad_model, a + ": attention.value_length " + std::to_string(hp.head_dim_v) +
                                            " must equal attention.key_length " + std::to_string(hp.head_dim));
    int64_t n_rec = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      n_rec += hp.is_recurrent(il);
      if (hp.is_recurrent(il)) check_gdn_layout(t, block_prefix(il));
    }
    load_layers(describe, hp, t, layers_);
    spdlog::info("{}: {} Gated DeltaNet layers (state {} floats per sequence each), {} attention layers", a, n_rec,
                 gdn_.conv_floats() + gdn_.state_floats(), hp.n_layer - n_rec);
  }

  BufferSizes buffer_sizes() const override {
    const int64_t q_dim = hp_.n_head * hp_.head_dim, kv_dim = hp_.n_head_kv * hp_.head_dim;
    BufferSizes b;
    b.q = std::max(2 * q_dim, gdn_.q_width());
    b.k = std::max({kv_dim, gdn_.k_width(), delta_rule_scratch_u16(gdn_.head_dim)});
    b.v = std::max(kv_dim, gdn_.v_width());
    b.att = std::max(q_dim, 4 * gdn_.n_v_head);  // gdn: raw b | a, beta, g
    b.ff = std::max(hp_.n_ff_expert, qwen_shexp_width(hp_));
    b.cache.k_dim = b.cache.v_dim = kv_dim;
    b.cache.conv_floats = gdn_.conv_floats();
    b.cache.state_floats = gdn_.state_floats();
    for (int64_t il = 0; il < hp_.n_layer; ++il) b.cache.attends.push_back(!hp_.is_recurrent(il));
    return b;
  }

 private:
  void attention(const Layer& L, int64_t il, ForwardState& s) const override {
    if (L.recurrent)
      gdn_attention(L.gdn, gdn_, il, s);
    else
      gated_attention(L.attn, il, s);
  }
  void ffn(const Layer& L, ForwardState& s) const override { moe_ffn(L.moe, s); }

  // s.xn -> s.out. s.q holds [t][head][query | gate], normed and rotated in place.
  void gated_attention(const GatedAttention& w, int64_t il, ForwardState& s) const {
    const int64_t n = s.n, hd = hp_.head_dim, n_head = hp_.n_head, n_kv = hp_.n_head_kv;
    const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
    kernels::matmul(w.wq, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
    kernels::matmul(w.wk, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
    kernels::matmul(w.wv, s.xn.data(), n, s.v.data(), *s.pool, s.mm);
    SequenceState& kv = *s.seqs;
    for (int64_t t = 0; t < n; ++t) {
      float* q = &s.q[t * 2 * q_dim];
      float* k = &s.k[t * kv_dim];
      for (int64_t h = 0; h < n_head; ++h)
        ops::rms_norm(q + h * 2 * hd, w.q_norm.data(), hd, hp_.rms_eps, q + h * 2 * hd);
      for (int64_t h = 0; h < n_kv; ++h) ops::rms_norm(k + h * hd, w.k_norm.data(), hd, hp_.rms_eps, k + h * hd);
      const int64_t pos = s.pos[t], seq = s.seq[t];
      apply_rope(q, n_head, 2 * hd, pos, rope_);
      apply_rope(k, n_kv, hd, pos, rope_);
      kernels::quantize_row(gguf::GgmlType::F16, k, kv.k(il, seq, pos), kv_dim);
      kernels::quantize_row(gguf::GgmlType::F16, &s.v[t * kv_dim], kv.v(il, seq, pos), kv_dim);
    }
    attend_cached(s.q.data(), 2 * q_dim, 2 * hd, n_head, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)), il, s,
                  s.att.data());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < n_head; ++h) {
        const float* gate = &s.q[t * 2 * q_dim + h * 2 * hd + hd];
        float* o = &s.att[t * q_dim + h * hd];
        for (int64_t i = 0; i < hd; ++i) o[i] *= sigmoid(gate[i]);
      }
    kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
  }

  RopeParams rope_;
  GdnShape gdn_;
};

}  // namespace

std::unique_ptr<Architecture> make_qwen_next(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<QwenNext>(hp, loader);
}

void qwen_next_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// Both: experts feed_forward_length / expert_used_count wide when the file
// does not say (as the reference sizes them), the hybrid layer pattern.
// qwen3next rotates NEOX, qwen35moe interleaved sections (imrope; the file
// must give rope.dimension_sections).
const ArchTraits qwen3next_traits = {.rope_type = RopeType::neox, .split_n_ff = true, .read_keys = read_hybrid_keys};
const ArchTraits qwen35moe_traits = {.rope_type = RopeType::imrope, .split_n_ff = true, .read_keys = read_hybrid_keys};

}  // namespace ns
