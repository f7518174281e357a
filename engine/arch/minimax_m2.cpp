// minimax-m2 (MiniMax-M2; the reference's src/models/minimax-m2.cpp). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += moe(rms_norm(x) * ffn_norm)
// Attention is GQA whose Q/K RMS norms span the whole projection (attn_q_norm
// [n_head * head_dim], attn_k_norm [n_head_kv * head_dim]: one norm over all
// heads of a token, not one per head), then NEOX RoPE over the first
// rope.dimension_count dims of each head (64 of 128 in MiniMax-M2).
// Every layer is MoE: sigmoid routing with the selection bias exp_probs_b
// (required), the chosen weights always renormalized and never scaled (the
// reference passes those to its MoE itself and reads neither key for this
// architecture); no shared expert.
#include <string>
#include <vector>

#include "engine/arch/layer_stack.h"
#include "engine/arch/minimax_m2.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "common/error.h"

namespace ns {
namespace {

struct MinimaxM2Layer {
  std::vector<float> attn_norm, ffn_norm;
  GqaWeights attn;
  GqaExtras extras;  // the full-width Q/K norms (and Q/K/V biases, where a file has them)
  MoeWeights moe;
};

// Every tensor of a minimax-m2 file's blocks, bound to `layers`.
void describe(const Hparams& hp, TensorTable& t, std::vector<MinimaxM2Layer>& layers) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::bad_model, "minimax-m2: " + m); };
  if (!hp.is_moe()) bad("expert_count is missing (every layer is MoE)");
  if (hp.head_dim_v != hp.head_dim)
    bad("attention.value_length " + std::to_string(hp.head_dim_v) + " must equal key_length " +
        std::to_string(hp.head_dim) + " (the reference asserts it too)");
  const int64_t d = hp.n_embd, q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  using R = TensorRole;
  describe_blocks(hp, t, layers, [&](int64_t, const std::string& p, MinimaxM2Layer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    // The reference takes Q/K/V biases from a file that has them; the converter writes none.
    gqa_tensors(t, p, hp, L.attn, &L.extras, Presence::tolerated);
    t.vector(p + "attn_q_norm.weight", q_dim, R::norm, &L.extras.q_norm);
    t.vector(p + "attn_k_norm.weight", kv_dim, R::norm, &L.extras.k_norm);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    moe_tensors(t, p, hp, L.moe, {.router = std::nullopt, .selection = Presence::required});
    // Fixed by the reference's graph for this architecture, whatever the metadata says.
    L.moe.normalize_weights = true;
    L.moe.weights_scale = 0.0f;
  });
}

class MinimaxM2 final : public GqaLayerStack<MinimaxM2Layer> {
 public:
  MinimaxM2(const Hparams& hp, TensorLoader& t) : GqaLayerStack(hp) {
    if (t.has("blk.0.attn_qkv.weight"))
      throw Error(ErrorKind::bad_model,
                  "minimax-m2: fused attn_qkv tensors are not supported; convert with separate attn_q/attn_k/attn_v "
                  "(as llama.cpp's convert_hf_to_gguf.py writes them)");
    load_layers(describe, hp, t, layers_);
  }

  BufferSizes buffer_sizes() const override { return gqa_buffer_sizes(hp_, hp_.n_ff_expert); }

 private:
  void ffn(const MinimaxM2Layer& L, ForwardState& s) const override { moe_ffn(L.moe, s); }
};

}  // namespace

std::unique_ptr<Architecture> make_minimax_m2(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<MinimaxM2>(hp, loader);
}

void minimax_m2_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NEOX rope. The converter always writes expert_gating_func (sigmoid, from the
// model's scoring_func); a file without it is read as the sigmoid-routed model
// it is (the reference's graph would refuse it).
const ArchTraits minimax_m2_traits = {.rope_type = RopeType::neox, .default_gating = ExpertGating::sigmoid};

}  // namespace ns
