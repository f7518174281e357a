// Feed-forward blocks: the dense SwiGLU FFN and the routed mixture of experts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/spec/hparams.h"
#include "engine/spec/tensor_loader.h"
#include "engine/spec/tensor_table.h"

namespace ns {

// The gated FFN's activation act(gate, up): silu(gate) * up (SwiGLU, most
// architectures), kimi-k3's situ (ops::situ_mul) with its two betas, or
// gpt-oss's clamped SwiGLU (ops::swiglu_oai_mul) with its alpha and limit.
struct FfnActivation {
  // swiglu_clamp (deepseek4): silu(min(gate, limit)) * clamp(up, -limit, limit).
  // silu_clamp (bailingmoe3): min(silu(gate), limit) * clamp(up, -limit, limit).
  enum class Kind { silu, situ, swiglu_oai, swiglu_clamp, silu_clamp } kind = Kind::silu;
  float beta = 0.0f, linear_beta = 0.0f;  // situ only
  float alpha = 0.0f, limit = 0.0f;       // swiglu_oai (alpha, limit), swiglu_clamp and silu_clamp (limit)
  // situ when the file sets activation.situ_beta, else silu.
  static FfnActivation of(const Hparams& hp);
  // gate = act(gate, up) over `rows` rows of `width` values (silu goes row by
  // row, as the reference's swiglu: ops::silu_mul).
  void apply(float* gate, const float* up, int64_t rows, int64_t width) const;
};

struct FfnWeights {
  kernels::MatrixView gate, up, down;
  FfnActivation act;
  // Optional biases added after each matmul (gpt-oss's experts): [gate.rows], [up.rows], [down.rows].
  const float* gate_b = nullptr;
  const float* up_b = nullptr;
  const float* down_b = nullptr;
};

// The table entries (spec/tensor_table.h) of a gated FFN of width n_ff at
// layer prefix p ("blk.N."): ffn_gate<suffix>, ffn_up<suffix>, ffn_down<suffix>
// (suffix "" for a dense FFN, "_shexp" for shared experts), bound to w's matrices.
void ffn_tensors(TensorTable& t, const std::string& p, const std::string& suffix, int64_t n_ff, int64_t n_embd,
                 FfnWeights& w);

// out[m][down rows] = down(act(gate(in) + gate_b, up(in) + up_b)) + down_b for
// m rows of in (absent biases add nothing); a, b are [m][n_ff] scratch.
// per_token: expert matmuls sum per token like the reference's mul_mat_id (see kernels::matmul).
void gated_ffn(const FfnWeights& w, const float* in, int64_t m, float* a, float* b, float* out, ForwardState& s,
               bool per_token = false);

// One MoE layer as the reference's build_moe_ffn computes it:
//   logits = router(x) + router_bias (when the layer has one)
//   probs  = softmax or sigmoid of the router logits; softmax_weight (gpt-oss):
//            the logits themselves, and weight = softmax over the chosen ones
//   choose = top n_used of (probs + selection_bias), within the n_groups_used
//            best groups (a group scores the sum of its two best) when grouped
//   weight = probs of the chosen (not biased), renormalized if asked, times weights_scale
//   out    = sum of weight * expert(x), plus the shared experts (gated or not)
// Latent MoE (kimi-k3, routed_down set): the router still reads x, but the
// experts run on routed_down(x) in the latent width, and
//   out    = routed_up(rms_norm(sum of weight * expert) * routed_norm) + shared experts(x)
// (the norm only with routed_norm).
struct MoeWeights {
  int64_t layer = -1;              // block index: the expert cache's key (moe_tensors sets it from the table)
  kernels::MatrixView router;      // [n_expert rows][n_embd]
  std::vector<float> router_bias;  // ffn_gate_inp.bias [n_expert], or empty (gpt-oss)
  // Per-expert biases of the routed experts (gpt-oss's ffn_*_exps.bias), or
  // empty: [n_expert][n_ff_expert] for gate and up, [n_expert][width] for down.
  std::vector<float> gate_bias, up_bias, down_bias;
  ExpertsView gate, up, down;       // [n_ff_expert][width], [width][n_ff_expert]: width = n_embd or the latent width
  FfnActivation act;                // the routed experts' activation
  kernels::MatrixView routed_down;  // [latent][n_embd]; rows == 0: no latent projection
  kernels::MatrixView routed_up;    // [n_embd][latent]
  std::vector<float> routed_norm;   // [latent], or empty
  float rms_eps = 1e-6f;            // for routed_norm
  int64_t n_used = 0;
  bool normalize_weights = true;  // renormalize the chosen experts' weights to sum to 1
  ExpertGating gating = ExpertGating::softmax;
  std::vector<float> selection_bias;  // exp_probs_b [n_expert], or empty
  float weights_scale = 0.0f;         // expert_weights_scale; 0 and 1 leave the weights as they are
  int64_t n_groups = 0;               // expert_group_count (<= 1: no group limit)
  int64_t n_groups_used = 0;          // expert_group_used_count
  // Hash routing (deepseek4's first layers): [n_vocab][n_used] expert ids per
  // token id (ffn_gate_tid2eid) instead of the top scores; the router still
  // weighs them. Empty: routed by score.
  std::vector<int32_t> hash_experts;

  // Shared experts (ffn_*_shexp), applied to every token. `shared.gate.rows`
  // is their total hidden width (the reference stacks n_shared experts into
  // one FFN). With shared_gate_inp (qwen2moe's ffn_gate_inp_shexp) the result
  // is scaled per token by sigmoid(shared_gate_inp · x).
  bool has_shared = false;
  FfnWeights shared;
  std::vector<float> shared_gate_inp;  // [n_embd], or empty
};

// The router's optional tensors an architecture has, with their presence
// (none: not the architecture's; the loader leaves such a tensor unused).
struct MoeBiases {
  std::optional<Presence> router;                                   // ffn_gate_inp.bias (gpt-oss)
  std::optional<Presence> selection = Presence::tolerated;          // exp_probs_b.bias
  static MoeBiases none() { return {std::nullopt, std::nullopt}; }  // the router alone (llama, qwen*)
};
// The table entries of layer prefix p's ("blk.N.") router and its biases,
// routed experts and, when hp.n_expert_latent > 0, latent projections
// (ffn_routed_down/_up, ffn_routed_norm optional), in that order, bound to m;
// sets m's routing settings and activation from hp.
void moe_tensors(TensorTable& t, const std::string& p, const Hparams& hp, MoeWeights& m, const MoeBiases& biases = {});
// The table entries of a shared expert of width n_ff scaled per token by
// sigmoid(ffn_gate_inp_shexp · x) (qwen2moe, qwen3next, qwen35moe):
// ffn_gate_inp_shexp, then ffn_{gate,up,down}_shexp; sets m.has_shared.
void gated_shared_expert_tensors(TensorTable& t, const std::string& p, int64_t n_ff, int64_t n_embd, MoeWeights& m);

// s.xn -> s.out: route every token to its top n_used experts, then run each
// expert once over all the tokens routed to it (expert-major), keep each
// (token, slot) output in s.slot_out and sum them per token in slot order
// (so the result does not depend on the order experts arrive in); then add
// the shared experts. Scratch: s.ff_a/s.ff_b must hold [n][shared width] when
// has_shared; s.ex_in/s.ex_out/s.slot_out rows are max(n_embd, expert width)
// wide; s.moe_latent holds [n][latent] for latent experts.
// With s.experts set, the routed experts come from the expert cache (acquired
// for w.layer, taken as their reads land) instead of the mapping, and with
// s.predict_next the next layer's experts are prefetched meanwhile.
void moe_ffn(const MoeWeights& w, ForwardState& s);

// A layer's feed-forward part in DeepSeek's pattern (deepseek2, kimi-linear,
// kimi-k3, glm4moe): a dense gated FFN for the first leading_dense_block_count layers,
// then routed experts plus the shared experts (ffn_*_shexp, n_shared experts
// stacked into one FFN of n_shared * n_ff_expert, always applied).
struct DeepseekFfn {
  bool is_moe = false;
  FfnWeights dense;
  MoeWeights moe;
};
// The table entries of block il's FFN at prefix p ("blk.N."): ffn_gate/up/down
// of n_ff for a leading dense layer; else moe_tensors (exp_probs_b.bias of
// presence `selection`), then ffn_{gate,up,down}_shexp when the model has
// shared experts, shared_width wide (< 0: expert_shared_count times the
// expert width; 0: none). Bound to f, activations from hp.
void deepseek_ffn_tensors(TensorTable& t, const std::string& p, const Hparams& hp, int64_t il, DeepseekFfn& f,
                          Presence selection, int64_t shared_width = -1);
// Widest hidden layer the block needs in s.ff_a / s.ff_b (shared_width as above).
int64_t deepseek_ffn_width(const Hparams& hp, int64_t shared_width = -1);
// s.xn -> s.out.
void deepseek_ffn(const DeepseekFfn& f, ForwardState& s);

}  // namespace ns
