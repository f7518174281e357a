// glm4moe (GLM-4.5 / 4.5-Air / 4.6 / 4.7; the reference's src/models/glm4-moe.cpp). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * post_attention_norm)
// Attention is GQA with Q/K/V biases, per-head Q/K RMS norms when the file has
// them (GLM-4.5 355B: use_qk_norm; Air has none), and NEOX RoPE over only the
// first rope.dimension_count dims of each head (the converter writes half the
// head: partial_rotary_factor 0.5); YaRN when the file asks for it.
// The FFN is DeepSeek's pattern (engine/layers/ffn.h DeepseekFfn): dense for
// the first leading_dense_block_count layers, then sigmoid routing with the
// selection bias exp_probs_b, the chosen weights renormalized
// (expert_weights_norm) and scaled by routed_scaling_factor
// (expert_weights_scale), plus the shared expert.
// The NextN (multi-token prediction) blocks GGUFs carry after the last layer
// (nextn_predict_layers) are in the table but never read, as the reference's
// graph skips them; Hparams::n_layer already excludes them.
#include <string>
#include <vector>

#include "engine/arch/glm4_moe.h"
#include "engine/arch/layer_stack.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "common/error.h"

namespace ns {
namespace {

struct Glm4MoeLayer {
  std::vector<float> attn_norm, ffn_norm;  // ffn_norm: post_attention_norm.weight
  GqaWeights attn;
  GqaExtras extras;
  DeepseekFfn ffn;
};

// Every tensor of a glm4moe file's blocks, bound to `layers` (one per layer
// that runs); the NextN blocks after them (a layer's tensors plus the nextn.*
// projection and norms) are described but never read.
void describe(const Hparams& hp, TensorTable& t, std::vector<Glm4MoeLayer>& layers) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::bad_model, "glm4moe: " + m); };
  if (!hp.is_moe()) bad("expert_count is missing (layers after leading_dense_block_count are MoE)");
  if (hp.n_layer_dense_lead > 0 && hp.n_ff <= 0) bad("feed_forward_length is missing for the leading dense layers");
  if (hp.head_dim_v != hp.head_dim)
    bad("attention.value_length " + std::to_string(hp.head_dim_v) + " must equal key_length " +
        std::to_string(hp.head_dim) + " (the reference asserts it too)");
  const int64_t d = hp.n_embd, hd = hp.head_dim;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t il, const std::string& p, Glm4MoeLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    gqa_tensors(t, p, hp, L.attn, &L.extras, Presence::optional);
    // Per-head Q/K norms when the file has them (GLM-4.5 355B; Air has none).
    t.vector(p + "attn_q_norm.weight", hd, R::norm, &L.extras.q_norm, Presence::optional);
    t.vector(p + "attn_k_norm.weight", hd, R::norm, &L.extras.k_norm, Presence::optional);
    t.vector(p + "post_attention_norm.weight", d, R::norm, &L.ffn_norm);
    deepseek_ffn_tensors(t, p, hp, il, L.ffn, Presence::required);
    if (il >= hp.n_layer) {
      t.matrix(p + "nextn.eh_proj.weight", d, 2 * d, R::input, nullptr);
      for (const char* norm : {"enorm", "hnorm", "shared_head_norm"})
        t.vector(p + "nextn." + norm + ".weight", d, R::norm, nullptr);
    }
  });
}

class Glm4Moe final : public GqaLayerStack<Glm4MoeLayer> {
 public:
  Glm4Moe(const Hparams& hp, TensorLoader& t) : GqaLayerStack(hp) {
    if (t.has("blk.0.attn_qkv.weight"))
      throw Error(ErrorKind::bad_model,
                  "glm4moe: fused attn_qkv tensors are not supported; convert with separate attn_q/attn_k/attn_v");
    load_layers(describe, hp, t, layers_);
  }

  BufferSizes buffer_sizes() const override { return gqa_buffer_sizes(hp_, deepseek_ffn_width(hp_)); }

 private:
  void ffn(const Glm4MoeLayer& L, ForwardState& s) const override { deepseek_ffn(L.ffn, s); }
};

}  // namespace

std::unique_ptr<Architecture> make_glm4_moe(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<Glm4Moe>(hp, loader);
}

void glm4_moe_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NEOX rope; without expert_gating_func the reference's loader gates with
// sigmoid and, without expert_feed_forward_length, sizes each expert as
// feed_forward_length / expert_used_count.
const ArchTraits glm4_moe_traits = {
    .rope_type = RopeType::neox, .default_gating = ExpertGating::sigmoid, .split_n_ff = true};

}  // namespace ns
