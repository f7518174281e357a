// bailingmoe2 (Ling 2.0 / Ring 2.0; the reference's src/models/bailingmoe2.cpp). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * ffn_norm)
// Attention is GQA through one fused projection attn_qkv (Q, K, V side by
// side), per-head Q/K RMS norms (attn_q_norm, attn_k_norm [head_dim]), then
// NEOX RoPE over the first rope.dimension_count dims of each head (half the
// head: partial_rotary_factor 0.5).
// The FFN: dense for the first leading_dense_block_count layers, then
// sigmoid routing (expert_gating_func) with the selection bias exp_probs_b
// when the file has it, group-limited when expert_group_count > 1 (the best
// expert_group_used_count groups, a group scoring its two best experts), the
// chosen weights renormalized (expert_weights_norm) and scaled
// (expert_weights_scale), plus the shared experts, always applied: one FFN of
// (expert_shared_feed_forward_length, else expert_feed_forward_length) times
// expert_shared_count, as the reference sizes it.
// The NextN (multi-token prediction) blocks after the last layer
// (nextn_predict_layers) are in the table but never read, as the reference's
// graph skips them; Hparams::n_layer already excludes them.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/arch/bailingmoe2.h"
#include "engine/arch/layer_stack.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "common/error.h"

namespace ns {
namespace {

struct BailingLayer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;   // the fused attn_qkv and attn_output
  GqaExtras extras;  // the per-head Q/K norms
  DeepseekFfn ffn;
};

// The shared experts' total width: the reference multiplies the stored width
// by the count, whether the converter stored one expert's or all of them.
int64_t shared_width(const Hparams& hp) {
  return (hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff_expert) * hp.n_expert_shared;
}

// Every tensor of a bailingmoe2 file's blocks, bound to `layers` (one per
// layer that runs); the NextN blocks after them (a layer's tensors plus the
// nextn.* projection and norms and layer_output_norm) are described but never
// read (their optional embed_tokens and shared_head_head are left out).
void describe(const Hparams& hp, TensorTable& t, std::vector<BailingLayer>& layers) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::bad_model, "bailingmoe2: " + m); };
  if (!hp.is_moe()) bad("expert_count is missing (layers after leading_dense_block_count are MoE)");
  if (hp.n_layer_dense_lead > 0 && hp.n_ff <= 0) bad("feed_forward_length is missing for the leading dense layers");
  if (hp.head_dim_v != hp.head_dim)
    bad("attention.value_length " + std::to_string(hp.head_dim_v) + " must equal key_length " +
        std::to_string(hp.head_dim) + " (the reference asserts it too)");
  if (hp.n_head * hp.head_dim != hp.n_embd)
    bad("attn_qkv's query part is embedding_length wide in the reference's layout: head_count " +
        std::to_string(hp.n_head) + " x key_length " + std::to_string(hp.head_dim) + " must equal embedding_length " +
        std::to_string(hp.n_embd));
  const int64_t d = hp.n_embd, hd = hp.head_dim;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, BailingLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    gqa_fused_qkv_tensor(t, p, hp, L.attn);
    t.vector(p + "attn_q_norm.weight", hd, R::norm, &L.extras.q_norm);
    t.vector(p + "attn_k_norm.weight", hd, R::norm, &L.extras.k_norm);
    t.matrix(p + "attn_output.weight", d, hp.n_head * hd, R::residual, &L.attn.wo);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    DeepseekFfn& f = L.ffn;
    f.is_moe = il >= hp.n_layer_dense_lead;
    if (!f.is_moe) {
      ffn_tensors(t, p, "", hp.n_ff, d, f.dense);
      f.dense.act = FfnActivation::of(hp);
    } else {
      moe_tensors(t, p, hp, f.moe, {.router = std::nullopt, .selection = Presence::optional});
      if (hp.n_expert_shared > 0) {
        f.moe.has_shared = true;
        ffn_tensors(t, p, "_shexp", shared_width(hp), d, f.moe.shared);
        f.moe.shared.act = FfnActivation::of(hp);
      }
    }
    if (il >= hp.n_layer) {
      t.matrix(p + "nextn.eh_proj.weight", d, 2 * d, R::input, nullptr);
      for (const char* norm : {"nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm", "layer_output_norm"})
        t.vector(p + norm + ".weight", d, R::norm, nullptr);
    }
  });
}

class Bailingmoe2 final : public GqaLayerStack<BailingLayer> {
 public:
  Bailingmoe2(const Hparams& hp, TensorLoader& t) : GqaLayerStack(hp) {
    if (!t.has("blk.0.attn_qkv.weight") && t.has("blk.0.attn_q.weight"))
      throw Error(ErrorKind::bad_model,
                  "bailingmoe2: separate attn_q/attn_k/attn_v tensors are not supported; convert with llama.cpp's "
                  "convert_hf_to_gguf.py, which writes the fused attn_qkv");
    load_layers(describe, hp, t, layers_);
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b = gqa_buffer_sizes(hp_, std::max(deepseek_ffn_width(hp_), shared_width(hp_)));
    b.q = gqa_fused_qkv_width(hp_);  // the fused product lands in s.q before the split
    return b;
  }

 private:
  void ffn(const BailingLayer& L, ForwardState& s) const override { deepseek_ffn(L.ffn, s); }
};

}  // namespace

std::unique_ptr<Architecture> make_bailingmoe2(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<Bailingmoe2>(hp, loader);
}

void bailingmoe2_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NEOX rope. The converter always writes expert_gating_func (sigmoid, the
// model's score_function), which the reference requires; a file without it is
// read as the sigmoid-routed model it is.
const ArchTraits bailingmoe2_traits = {.rope_type = RopeType::neox, .default_gating = ExpertGating::sigmoid};

}  // namespace ns
