// Feed-forward blocks: the dense SwiGLU FFN and the routed mixture of experts.
#pragma once

#include <vector>

#include "engine/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/model/hparams.h"
#include "engine/model/tensor_loader.h"

namespace ns {

struct FfnWeights {
  kernels::MatrixView gate, up, down;
};

// out[m][n_embd] = down(silu(gate(in)) * up(in)) for m rows of in; a, b are [m][n_ff] scratch.
// per_token: expert matmuls sum per token like the reference's mul_mat_id (see kernels::matmul).
void swiglu(const FfnWeights& w, const float* in, int64_t m, float* a, float* b, float* out, ForwardState& s,
            bool per_token = false);

// One MoE layer as the reference's build_moe_ffn computes it:
//   probs  = softmax or sigmoid of the router logits
//   choose = top n_used of (probs + selection_bias), within the n_groups_used
//            best groups (a group scores the sum of its two best) when grouped
//   weight = probs of the chosen (not biased), renormalized if asked, times weights_scale
//   out    = sum of weight * expert(x), plus the shared experts (gated or not)
struct MoeWeights {
  int64_t layer = -1;                  // block index: the expert cache's key (load_moe sets it)
  kernels::MatrixView router;          // [n_expert rows][n_embd]
  ExpertsView gate, up, down;
  int64_t n_used = 0;
  bool normalize_weights = true;       // renormalize the chosen experts' weights to sum to 1
  ExpertGating gating = ExpertGating::softmax;
  std::vector<float> selection_bias;   // exp_probs_b [n_expert], or empty
  float weights_scale = 0.0f;          // expert_weights_scale; 0 and 1 leave the weights as they are
  int64_t n_groups = 0;                // expert_group_count (<= 1: no group limit)
  int64_t n_groups_used = 0;           // expert_group_used_count

  // Shared experts (ffn_*_shexp), applied to every token. `shared.gate.rows`
  // is their total hidden width (the reference stacks n_shared experts into
  // one FFN). With shared_gate_inp (qwen2moe's ffn_gate_inp_shexp) the result
  // is scaled per token by sigmoid(shared_gate_inp · x).
  bool has_shared = false;
  FfnWeights shared;
  std::vector<float> shared_gate_inp;  // [n_embd], or empty
};

// Loads the routed experts, router and selection bias of layer prefix p
// ("blk.N.") with the routing settings in hp.
MoeWeights load_moe(TensorLoader& t, const std::string& p, const Hparams& hp);

// s.xn -> s.out: route every token to its top n_used experts, then run each
// expert once over all the tokens routed to it (expert-major), keep each
// (token, slot) output in s.slot_out and sum them per token in slot order
// (so the result does not depend on the order experts arrive in); then add
// the shared experts. Scratch: s.ff_a/s.ff_b must hold [n][shared width] when
// has_shared.
// With s.experts set, the routed experts come from the expert cache (acquired
// for w.layer, taken as their reads land) instead of the mapping, and with
// s.predict_next the next layer's experts are prefetched meanwhile.
void moe_ffn(const MoeWeights& w, ForwardState& s);

// A layer's feed-forward part in DeepSeek's pattern (deepseek2, kimi-linear,
// kimi-k3): a dense SwiGLU for the first leading_dense_block_count layers,
// then routed experts plus the shared experts (ffn_*_shexp, n_shared experts
// stacked into one FFN of n_shared * n_ff_expert, always applied).
struct DeepseekFfn {
  bool is_moe = false;
  FfnWeights dense;
  MoeWeights moe;
};
DeepseekFfn load_deepseek_ffn(TensorLoader& t, const std::string& p, const Hparams& hp, int64_t il);
// Widest hidden layer the block needs in s.ff_a / s.ff_b.
int64_t deepseek_ffn_width(const Hparams& hp);
// s.xn -> s.out.
void deepseek_ffn(const DeepseekFfn& f, ForwardState& s);

}  // namespace ns
