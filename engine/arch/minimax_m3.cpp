// minimax-m3 (MiniMax-M3; the reference's src/models/minimax-m3.cpp). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * ffn_norm)
// Attention is GQA with per-head Q/K RMS norms (one [head_dim] weight shared
// by the heads, unlike minimax-m2's full-width ones), then NEOX RoPE over the
// first rope.dimension_count dims of each head. The FFN is DeepSeek-V3's
// pattern: leading_dense_block_count dense layers, then sigmoid-routed experts
// with the selection bias exp_probs_b plus the shared experts; every FFN's
// activation is gpt-oss's clamped SwiGLU (swigluoai, alpha 1.702, limit 7,
// fixed in the reference's graph). The MoE layers attend sparsely (MiniMax
// sparse attention, engine/layers/msa_indexer.h): each KV group reads the
// top_k blocks of past positions its indexer head picks, the local ones
// always among them; the dense lead layers attend to every position. The
// indexer's key rides in the K cache row after the layer's K (the dense
// layers leave that part unused), so the sequence state, its persistence and
// the memory plan count it. The norm weights hold Gemma's "+1" already (the
// converter adds it), so they are plain RMS norm weights here.
//
// The reference runs the sparse selection only with flash attention on; with
// it off (how goldens are made) its graph attends densely and warns. This
// file always computes the model's sparse attention: the goldens that select
// (a prompt past top_k blocks) are made with the reference's flash attention
// on (tests/conformance/reference/make_goldens.sh, docs/models.md).
#include "engine/arch/minimax_m3.h"

#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/gguf/gguf_file.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/msa_indexer.h"
#include "engine/spec/metadata_keys.h"
#include "common/error.h"

namespace ns {
namespace {

// swigluoai's constants in the reference's build_ffn / build_moe_ffn.
constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

struct MinimaxM3Layer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  GqaExtras extras;  // the per-head Q/K norms
  bool sparse = false;
  MsaWeights indexer;
  DeepseekFfn ffn;
};

void describe(const Hparams& hp, TensorTable& t, std::vector<MinimaxM3Layer>& layers) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::bad_model, "minimax-m3: " + m); };
  if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
    bad("expert_count is missing but layers " + std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
  if (hp.head_dim_v != hp.head_dim)
    bad("attention.value_length " + std::to_string(hp.head_dim_v) + " must equal key_length " +
        std::to_string(hp.head_dim) + " (the reference asserts it too)");
  const MsaShape ms = msa_shape(hp, hp.n_head_kv * hp.head_dim);
  const int64_t d = hp.n_embd;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, MinimaxM3Layer& L) {
    gqa_tensors(t, p, hp, L.attn);
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    t.vector(p + "attn_q_norm.weight", hp.head_dim, R::norm, &L.extras.q_norm);
    t.vector(p + "attn_k_norm.weight", hp.head_dim, R::norm, &L.extras.k_norm);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    deepseek_ffn_tensors(t, p, hp, il, L.ffn, Presence::required);
    const FfnActivation act{.kind = FfnActivation::Kind::swiglu_oai, .alpha = kSwigluAlpha, .limit = kSwigluLimit};
    L.ffn.dense.act = L.ffn.moe.act = L.ffn.moe.shared.act = act;
    L.sparse = L.ffn.is_moe;  // the reference's sparse layers are its MoE layers
    if (L.sparse) msa_tensors(t, p, ms, d, L.indexer);
  });
}

class MinimaxM3 final : public LayerStack<MinimaxM3Layer> {
 public:
  MinimaxM3(const Hparams& hp, TensorLoader& t)
      : LayerStack(hp), rope_(rope_params(hp)), ms_(msa_shape(hp, hp.n_head_kv * hp.head_dim)) {
    if (t.has("blk.0.attn_qkv.weight"))
      throw Error(ErrorKind::bad_model,
                  "minimax-m3: fused attn_qkv tensors are not supported; convert with separate attn_q/attn_k/attn_v "
                  "(as llama.cpp's converter writes them)");
    load_layers(describe, hp, t, layers_);
  }

  // GQA's buffers; the K cache row also holds the indexer's key.
  BufferSizes buffer_sizes() const override {
    BufferSizes b = gqa_buffer_sizes(hp_, deepseek_ffn_width(hp_));
    b.cache.k_dim += ms_.head_dim;
    return b;
  }

 private:
  void attention(const MinimaxM3Layer& L, int64_t il, ForwardState& s) const override {
    gqa_project(L.attn, L.extras, hp_, rope_, s);
    if (!L.sparse) return gqa_attend(L.attn.wo, hp_, il, s);
    msa_select(L.indexer, ms_, il, s, selection_);
    gqa_attend(L.attn.wo, hp_, il, s, selection_.keep.data());
  }
  void ffn(const MinimaxM3Layer& L, ForwardState& s) const override { deepseek_ffn(L.ffn, s); }

  RopeParams rope_;
  MsaShape ms_;
  mutable MsaSelection selection_;  // this layer's, for this forward pass
};

// Absent keys read as 0, which loading the model refuses naming the key (msa_shape).
void read_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.indexer_n_head = optional_hparam_count(f, a + keys::attention_indexer_head_count, 1 << 12);
  h.indexer_head_dim = optional_hparam_count(f, a + keys::attention_indexer_key_length, 1 << 16);
  h.indexer_top_k = optional_hparam_count(f, a + keys::attention_indexer_top_k, 1u << 31);
  h.indexer_block_size = optional_hparam_count(f, a + keys::attention_indexer_block_size, 1u << 20);
  h.indexer_local_blocks = optional_hparam_count(f, a + keys::attention_indexer_local_blocks, 1u << 31);
}

}  // namespace

std::unique_ptr<Architecture> make_minimax_m3(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<MinimaxM3>(hp, loader);
}

void minimax_m3_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NEOX rope. The converter always writes expert_gating_func (sigmoid, from the
// model's scoring_func); a file without it is read as the sigmoid-routed model
// it is (the reference requires the key).
const ArchTraits minimax_m3_traits = {
    .rope_type = RopeType::neox, .default_gating = ExpertGating::sigmoid, .read_keys = read_keys};

}  // namespace ns
