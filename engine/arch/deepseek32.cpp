// deepseek32 (DeepSeek V3.2) and glm-dsa (GLM-5, 5.1, 5.2): deepseek2's layer
// (MLA over the latent cache, a dense lead then routed plus shared experts)
// with DeepSeek sparse attention: each layer's lightning indexer
// (engine/layers/dsa_indexer.h) picks the indexer_top_k cached positions
// each query's heads attend to; below top_k positions that is dense MLA. The
// indexer's keys ride in the latent cache rows (MlaShape::indexer_width), so
// the sequence state, its persistence and the memory plan count them.
//
// One file for both: the reference's two graphs differ only in what their
// traits below hold as data (the indexer's rope form, its LayerNorm epsilon,
// the default gating, YaRN's log multiplier, glm-dsa's per-layer indexer
// types, where a "shared" layer reuses the last full layer's selection).
// NextN blocks are in the table but never read (the reference's draft head).
#include "engine/arch/deepseek32.h"

#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/gguf/gguf_file.h"
#include "engine/layers/dsa_indexer.h"
#include "engine/layers/ffn.h"
#include "engine/layers/mla_attention.h"
#include "engine/state/trace.h"
#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns {
namespace {

struct DsaLayer {
  std::vector<float> attn_norm, ffn_norm;
  MlaWeights attn;
  DsaWeights indexer;
  DeepseekFfn ffn;
};

[[noreturn]] void bad(const Hparams& hp, const std::string& why) {
  throw Error(ErrorKind::bad_model, hp.arch + ": " + why);
}

// NextN blocks (il >= n_layer) list theirs too (described, skipped).
bool full_indexer(const Hparams& hp, int64_t il) {
  return il >= static_cast<int64_t>(hp.indexer_full_layers.size()) ||
         hp.indexer_full_layers[static_cast<size_t>(il)] != 0;
}

void describe(const Hparams& hp, TensorTable& t, std::vector<DsaLayer>& layers) {
  if (!hp.is_mla()) bad(hp, "attention.key_length_mla / value_length_mla are missing (the split MLA layout)");
  if (hp.q_lora_rank <= 0) bad(hp, "attention.q_lora_rank is missing (the indexer reads the low-rank query)");
  if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
    bad(hp, "expert_count is missing but layers " + std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
  const MlaShape sh = mla_shape(hp);
  const DsaShape ds = dsa_shape(hp, sh.latent_width());
  const int64_t d = hp.n_embd;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, DsaLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    mla_tensors(t, p, sh, d, MlaLayout::split, Presence::tolerated, L.attn);
    // A shared layer (glm-dsa) runs no indexer: its tensors, if any, are not needed.
    dsa_tensors(t, p, ds, d, hp.q_lora_rank, full_indexer(hp, il) ? Presence::required : Presence::tolerated,
                L.indexer);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    deepseek_ffn_tensors(t, p, hp, il, L.ffn, Presence::optional);
    if (il >= hp.n_layer) {  // the NextN (MTP) block's own parts: the reference's draft head, never run here
      t.matrix(p + "nextn.eh_proj.weight", d, 2 * d, R::input, nullptr);
      for (const char* norm : {"enorm", "hnorm", "shared_head_norm"})
        t.vector(p + "nextn." + norm + ".weight", d, R::norm, nullptr);
    }
  });
}

class Deepseek32 final : public LayerStack<DsaLayer> {
 public:
  Deepseek32(const Hparams& hp, TensorLoader& t, const ArchOptions&)
      : LayerStack(hp), sh_(mla_shape(hp)), ds_(dsa_shape(hp, sh_.latent_width())) {
    sh_.indexer_width = ds_.head_dim;
    if (!full_indexer(hp, 0)) bad(hp, "layer 0's indexer is shared (attention.indexer.types): no full layer before it");
    load_layers(describe, hp, t, layers_);
    for (int64_t il = 0; il < hp.n_layer; ++il)
      finish_mla(layers_[static_cast<size_t>(il)].attn, sh_, block_prefix(il));
  }

  // deepseek2's buffers; the cache row also holds the indexer's key (sh_.indexer_width).
  BufferSizes buffer_sizes() const override { return mla_buffer_sizes(sh_, deepseek_ffn_width(hp_)); }

 private:
  void attention(const DsaLayer& L, int64_t il, ForwardState& s) const override {
    mla_project(L.attn, sh_, s);
    trace(s, "qr", il, s.v.data(), sh_.q_lora_rank);
    trace(s, "q", il, s.att.data(), sh_.n_head * sh_.k_head());
    trace(s, "kv_cmpr", il, s.k.data(), sh_.latent_width());
    // Layers run in order within a forward pass, so a shared layer finds the
    // selection its last full layer made for this batch.
    if (full_indexer(hp_, il)) dsa_select(L.indexer, ds_, il, s.v.data(), s, selection_);
    if (s.trace_observer != nullptr && *s.trace_observer) {  // the positions each token attends to, as 0/1
      std::vector<float> keep(static_cast<size_t>(s.n * selection_.stride), 1.0f);
      for (int64_t t = 0; t < s.n; ++t)
        if (const uint8_t* m = selection_.keep[static_cast<size_t>(t)])
          for (int64_t j = 0; j <= s.pos[t]; ++j) keep[static_cast<size_t>(t * selection_.stride + j)] = m[j];
      trace(s, "dsa_keep", il, keep.data(), selection_.stride);
    }
    mla_attend(L.attn, sh_, il, s, selection_.keep.data());
  }
  void ffn(const DsaLayer& L, ForwardState& s) const override { deepseek_ffn(L.ffn, s); }

  MlaShape sh_;
  DsaShape ds_;
  mutable DsaSelection selection_;  // this forward pass's, from the last full indexer layer
};

// Absent keys read as 0, which loading the model refuses naming the key (dsa_shape).
void read_indexer_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.indexer_n_head = optional_hparam_count(f, a + keys::attention_indexer_head_count, 1 << 12);
  h.indexer_head_dim = optional_hparam_count(f, a + keys::attention_indexer_key_length, 1 << 16);
  h.indexer_top_k = optional_hparam_count(f, a + keys::attention_indexer_top_k, 1u << 31);
}

void read_deepseek32_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  read_indexer_keys(f, a, h);
  h.indexer_rope_type = RopeType::neox;
  h.indexer_norm_eps = 1e-6f;  // the reference's f_norm_eps for deepseek32
}

// GLM-5.2's layer types when its file has no attention.indexer.types (the
// reference's default, from its config.json): the first two layers and then
// every fourth from layer 2 full, of 78.
bool glm52_default_full(int64_t il) { return il < 78 && (il < 2 || (il - 2) % 4 == 0); }

void read_glm_dsa_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  read_indexer_keys(f, a, h);
  h.indexer_rope_type = RopeType::norm;
  // The reference's glm-dsa loader never sets f_norm_eps, which stays 0, nor
  // reads rope.scaling.yarn_log_multiplier.
  h.indexer_norm_eps = 0.0f;
  h.yarn_log_mul = 0.0f;
  const std::string key = a + keys::attention_indexer_types;
  const gguf::Value* v = f.find(key);
  h.indexer_full_layers.clear();
  if (v != nullptr && v->type == gguf::ValueType::ARRAY) {
    if (static_cast<int64_t>(v->arr.size()) < h.n_layer)
      bad_hparam(f, key,
                 "has " + std::to_string(v->arr.size()) + " entries, expected one per layer (" +
                     std::to_string(h.n_layer) + ")");
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const gguf::Value& e = v->arr[static_cast<size_t>(il)];
      if (e.type != gguf::ValueType::BOOL && !e.is_integer()) bad_hparam(f, key, "should be an array of booleans");
      h.indexer_full_layers.push_back(e.u != 0 || e.i != 0);
    }
  } else if (v != nullptr) {
    bad_hparam(f, key, "should be an array of booleans, one per layer");
  } else {
    // GLM-5 and 5.1 (trained below 1M context) have a full indexer in every layer.
    const bool pre_5_2 = h.n_ctx_train < 1048576;
    for (int64_t il = 0; il < h.n_layer; ++il) h.indexer_full_layers.push_back(pre_5_2 || glm52_default_full(il));
  }
}

}  // namespace

std::unique_ptr<Architecture> make_deepseek32(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  return std::make_unique<Deepseek32>(hp, loader, options);
}

void deepseek32_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// Both read rope.scaling.yarn_log_multiplier as deepseek2 (glm-dsa's is zeroed by its reader).
const ArchTraits deepseek32_traits = {.yarn_mscale = YarnMscale::mscale_all_dim, .read_keys = read_deepseek32_keys};
// glm-dsa without expert_gating_func routes by sigmoid, as GLM-4.5.
const ArchTraits glm_dsa_traits = {
    .yarn_mscale = YarnMscale::mscale_all_dim, .default_gating = ExpertGating::sigmoid, .read_keys = read_glm_dsa_keys};

}  // namespace ns
