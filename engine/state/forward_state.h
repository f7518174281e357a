// Activations of one forward pass over a batch of tokens, allocated once at
// load for the largest batch so the token loop never allocates.
// Shapes are [max_batch][width] row-major; only the first n rows are live.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/spec/routing.h"

namespace ns {

class ThreadPool;
class SequenceState;
namespace stream {
class ExpertCache;
}

struct ForwardState {
  int64_t n = 0;            // tokens in this batch
  int64_t max_batch = 0;
  std::vector<int32_t> seq; // [B] KV cache sequence of each token
  std::vector<int32_t> pos; // [B] its position in that sequence
  std::vector<int32_t> tok; // [B] its token id (deepseek4's hash-routed layers)

  std::vector<float> x;     // [B][n_embd] residual stream
  std::vector<float> xn;    // [B][n_embd] normed input of the current block
  std::vector<float> out;   // [B][n_embd] output of the current block
  std::vector<float> q, k, v, att;  // attention: [B][n_head*head_dim], [B][kv dims], [B][n_head*v_head_dim]
  std::vector<float> ff_a, ff_b;    // [B][n_ff] FFN hidden (gate, up)
  std::vector<uint16_t> q16;        // [threads][head_dim] one query head in F16

  // MoE routing and expert-major gather buffers.
  std::vector<float> router;        // [B][n_expert]
  std::vector<int32_t> chosen;      // [B][n_used] expert ids
  std::vector<float> chosen_w;      // [B][n_used] their weights
  std::vector<int32_t> expert_count, expert_first, expert_rows;  // counting sort of (token, slot) by expert
  std::vector<float> ex_in, ex_a, ex_b, ex_out;                  // [B][...] one expert's tokens
  std::vector<float> slot_out;      // [B][n_used][n_embd] each (token, slot) expert output, reduced in slot order
  std::vector<int32_t> active;      // [2][n_expert] the distinct experts this layer routed to (+ a copy)
  std::vector<float> moe_latent;    // [B][latent] latent experts' input, then their weighted sum (kimi-k3)
  uint64_t experts_routed = 0;      // distinct (layer, expert) pairs routed to, summed over forward passes
  uint64_t mla_expanded = 0;        // (layer, token) pairs that attended over expanded keys (mla_attention.cpp)
  const RoutingObserver* routing_observer = nullptr;  // called once per MoE layer (routing.h)
  // Named intermediates (trace.h); its std::function type spelled out here so this header needs no other.
  const std::function<void(const char*, int64_t, const float*, int64_t, int64_t)>* trace_observer = nullptr;

  // Weight streaming (null: experts are read through the mapping). With
  // predict_next, moe_ffn applies the next MoE layer's router (routers[l], one
  // per layer, rows == 0 for dense layers) to this layer's normed input and
  // prefetches the experts it picks; predict_logits/predicted are its scratch.
  stream::ExpertCache* experts = nullptr;
  bool predict_next = false;
  int64_t predict_width = 0;        // experts prefetched per token; 0 = n_used
  std::vector<kernels::MatrixView> routers;
  std::vector<float> predict_logits;  // [B][n_expert]
  std::vector<int32_t> predicted;     // [n_expert]

  // Cross-layer attention residuals (kimi-k3): each token's banked layer
  // inputs, [B][n_ckpt][n_embd], and its mixing scores, [B][n_ckpt + 1].
  std::vector<float> res_ckpt, res_scores;

  // MLA's expanded prompt chunks (mla_attention.cpp, expand_run): sized once
  // at load by Architecture::context_scratch for the longest sequence and
  // chunk the memory plan admits (its formula: mla_attention.h), counted in
  // the plan's activations, never grown: a run splits its heads into as many
  // groups as these hold at its length. Empty: no chunk expands.
  std::vector<float> xp_latents;         // [key block][kv_lora] cached latents as F32
  std::vector<uint8_t> xp_k_b_t;         // [n_head][nope][kv_lora] k_b transposed (split files)
  std::vector<float> xp_kf, xp_vf;       // [heads][key block][nope], [..][v_head] expanded, before F16
  std::vector<uint16_t> xp_k16, xp_v16;  // [heads][keys][k_head], [..][v_head] as attention reads them
  std::vector<kernels::MatmulTask> xp_tasks;  // [2 n_head]

  ThreadPool* pool = nullptr;
  SequenceState* seqs = nullptr;  // attention cache and recurrent state of every sequence
  kernels::MatmulScratch mm;
};

}  // namespace ns
