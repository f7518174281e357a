// deepseek2: DeepSeek V2/V3, Kimi K2, Moonlight, DeepSeek-V2-Lite. A layer is
//   x += mla_attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * ffn_norm)
// where ffn is a dense SwiGLU for the first leading_dense_block_count layers,
// then routed experts plus the shared experts (ffn_*_shexp, always applied).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/arch/deepseek2.h"
#include "engine/arch/layer_stack.h"
#include "engine/layers/ffn.h"
#include "engine/layers/mla_attention.h"
#include "engine/state/ops.h"
#include "common/error.h"

namespace ns {
namespace {

struct Deepseek2Layer {
  std::vector<float> attn_norm, ffn_norm;
  MlaWeights attn;
  DeepseekFfn ffn;  // dense for the leading layers, routed + shared experts after
};

// Every tensor of a deepseek2 file's blocks, bound to `layers` (one per
// block). The key/value expansion is the reference's choice: split
// attn_k_b/attn_v_b in MLA files (key_length_mla), else the fused attn_kv_b.
void describe(const Hparams& hp, TensorTable& t, std::vector<Deepseek2Layer>& layers) {
  if (hp.n_layer_dense_lead < hp.n_layer && !hp.is_moe())
    throw Error(ErrorKind::bad_model, "deepseek2: expert_count is missing but layers " +
                                          std::to_string(hp.n_layer_dense_lead) + ".. are MoE layers");
  if (hp.n_layer_dense_lead > 0 && hp.n_ff <= 0)
    throw Error(ErrorKind::bad_model, "deepseek2: feed_forward_length is missing for the leading dense layers");
  const MlaShape sh = mla_shape(hp);
  const int64_t d = hp.n_embd;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, Deepseek2Layer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    mla_tensors(t, p, sh, d, hp.is_mla() ? MlaLayout::split : MlaLayout::fused, Presence::tolerated, L.attn);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    deepseek_ffn_tensors(t, p, hp, il, L.ffn, Presence::optional);
  });
}

class Deepseek2 final : public LayerStack<Deepseek2Layer> {
 public:
  // Files with the fused attn_kv_b cache the latent unless told otherwise,
  // like split files (a fraction of the memory); `mla_expanded_cache` runs them
  // as the reference does (the conformance goldens are such files).
  Deepseek2(const Hparams& hp, TensorLoader& t, const ArchOptions& o) : LayerStack(hp), sh_(mla_shape(hp)) {
    const bool fused = !hp.is_mla();
    sh_.expanded_cache = fused && o.mla_expanded_cache;
    sh_.expand_prefill = o.mla_expand_prefill;
    if (fused)
      spdlog::info(
          "deepseek2: fused attn_kv_b layout, {} KV cache ({} values per token and layer; "
          "--mla-cache {} to change)",
          sh_.expanded_cache ? "expanded (the reference's multi-head path)" : "latent",
          sh_.cache_k_width() + sh_.cache_v_width(), sh_.expanded_cache ? "latent" : "expanded");
    load_layers(describe, hp, t, layers_);
    for (int64_t il = 0; il < hp.n_layer; ++il)
      finish_mla(layers_[static_cast<size_t>(il)].attn, sh_, block_prefix(il));
  }

  BufferSizes buffer_sizes() const override { return mla_buffer_sizes(sh_, deepseek_ffn_width(hp_)); }

  uint64_t context_scratch(int64_t keys, int64_t queries, ForwardState* s) const override {
    std::vector<const MlaWeights*> mla;
    for (const Deepseek2Layer& L : layers_) mla.push_back(&L.attn);
    return mla_context_scratch(sh_, mla, keys, queries, s);
  }

 private:
  void attention(const Deepseek2Layer& L, int64_t il, ForwardState& s) const override {
    mla_attention(L.attn, sh_, il, s);
  }
  void ffn(const Deepseek2Layer& L, ForwardState& s) const override { deepseek_ffn(L.ffn, s); }

  MlaShape sh_;
};

}  // namespace

std::unique_ptr<Architecture> make_deepseek2(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  return std::make_unique<Deepseek2>(hp, loader, options);
}

void deepseek2_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// The reference reads deepseek2's rope.scaling.yarn_log_multiplier as
// 0.1 * mscale_all_dim and moves YaRN's magnitude to the softmax scale (mla_shape).
// Files written before expert_gating_func existed use softmax (the default).
const ArchTraits deepseek2_traits = {.yarn_mscale = YarnMscale::mscale_all_dim};

}  // namespace ns
