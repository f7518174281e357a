// What a tensor is for, as an architecture's table says it (tensor_table.h).
// Every "which tensors are ..." question is asked of the role, never of the
// name: the routed roles are what the expert cache streams (and nothing else
// is), the router role is what the cache's predictor reads, keeps_f32 is what
// the generator writes in F32. The loader records each loaded tensor's role
// (TensorLoader::note_role), so the model, the memory plan and `model info`
// read the roles of the tensors the model actually runs on.
#pragma once

#include <cstdint>

namespace ns {

enum class TensorRole : uint8_t {
  embedding,        // token_embd: one row per token
  norm,             // a normalization scale, near 1 (F32)
  bias,             // an additive bias (F32)
  input,            // a projection of the normalized stream or of another projection
  residual,         // a projection whose output is added to the residual stream
  router,           // a MoE layer's router (ffn_gate_inp): its logits choose the routed experts (F32)
  score,            // another score over the residual stream: a shared expert's gate, a mix score (F32)
  selection,        // a router's per-expert selection bias (exp_probs_b, F32)
  conv,             // a short convolution's taps, a row per channel (F32)
  routed,           // a routed experts' stack [cols, rows, n_expert]: streamed, not resident
  routed_residual,  // the routed experts' down stack, which writes the residual stream
  ids,              // a table of integers (I32): deepseek4's token id -> experts map
};
const char* role_name(TensorRole r);
// Routed experts' stacks: streamed from disk by the expert cache; every other role is resident.
inline bool is_routed(TensorRole r) { return r == TensorRole::routed || r == TensorRole::routed_residual; }
// Kept in F32 whatever type the rest of the model has (norms, biases, routers and scores).
inline bool keeps_f32(TensorRole r) {
  return r == TensorRole::norm || r == TensorRole::bias || r == TensorRole::router || r == TensorRole::score ||
         r == TensorRole::selection || r == TensorRole::conv;
}

}  // namespace ns
