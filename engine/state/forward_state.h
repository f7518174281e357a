// Activations of one forward pass over a batch of tokens, allocated once at
// load for the largest batch so the token loop never allocates.
// Shapes are [max_batch][width] row-major; only the first n rows are live.
//
// Contract: every buffer is listed once more, in for_each_buffer (gemma.cpp's
// ForEachTensor idea): Model::load allocates by visiting that list, the memory
// plan counts its bytes by visiting it, and forward_state_bytes measures what
// is held by visiting it (tests/unit/engine/fit_plan_test.cpp: the plan's
// activations are what the load allocated). A new buffer is a member and its
// line in the list, nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/spec/hparams.h"
#include "engine/spec/routing.h"
#include "engine/state/sequence_state.h"

namespace ns {

class ThreadPool;
class SequenceState;
namespace stream {
class ExpertCache;
}

// What an architecture asks of a pass's buffers (Architecture::buffer_sizes).
struct BufferSizes {
  int64_t q = 0, k = 0, v = 0, att = 0;  // per-token widths of the attention buffers
  int64_t ff = 0;                        // widest FFN hidden layer (dense or expert)
  SequenceLayout cache;                  // what each layer keeps per sequence (attention rows, recurrent state)
  int64_t res_checkpoints = 0;           // n_embd vectors banked per token within a forward pass (s.res_ckpt)
};

// What sizes every buffer of ForwardState: the model's widths and the pass.
struct BufferShape {
  const Hparams* hp = nullptr;  // null: no model (every buffer 0 elements)
  BufferSizes widths;
  int64_t tokens = 0;    // the longest forward pass (ForwardState::max_batch)
  int threads = 1;       // the compute threads (per-thread scratch)
  bool predict = false;  // the expert cache predicts the next layer's experts (routers, predict_*)
};

struct ForwardState {
  int64_t n = 0;  // tokens in this batch
  int64_t max_batch = 0;
  std::vector<int32_t> seq;  // [B] KV cache sequence of each token
  std::vector<int32_t> pos;  // [B] its position in that sequence
  std::vector<int32_t> tok;  // [B] its token id (deepseek4's hash-routed layers)

  std::vector<float> x;             // [B][n_embd] residual stream
  std::vector<float> xn;            // [B][n_embd] normed input of the current block
  std::vector<float> out;           // [B][n_embd] output of the current block
  std::vector<float> q, k, v, att;  // attention: [B][n_head*head_dim], [B][kv dims], [B][n_head*v_head_dim]
  std::vector<float> ff_a, ff_b;    // [B][n_ff] FFN hidden (gate, up)
  std::vector<uint16_t> q16;        // [threads][head_dim] one query head in F16

  // MoE routing and expert-major gather buffers.
  std::vector<float> router;                                     // [B][n_expert]
  std::vector<int32_t> chosen;                                   // [B][n_used] expert ids
  std::vector<float> chosen_w;                                   // [B][n_used] their weights
  std::vector<int32_t> expert_count, expert_first, expert_rows;  // counting sort of (token, slot) by expert
  std::vector<float> ex_in, ex_a, ex_b, ex_out;                  // [B][...] one expert's tokens
  std::vector<float> slot_out;    // [B][n_used][n_embd] each (token, slot) expert output, reduced in slot order
  std::vector<int32_t> active;    // [2][n_expert] the distinct experts this layer routed to (+ a copy)
  std::vector<float> moe_latent;  // [B][latent] latent experts' input, then their weighted sum (kimi-k3)
  uint64_t experts_routed = 0;    // distinct (layer, expert) pairs routed to, summed over forward passes
  uint64_t mla_expanded = 0;      // (layer, token) pairs that attended over expanded keys (mla_attention.cpp)
  const RoutingObserver* routing_observer = nullptr;  // called once per MoE layer (routing.h)
  // Named intermediates (trace.h); its std::function type spelled out here so this header needs no other.
  const std::function<void(const char*, int64_t, const float*, int64_t, int64_t)>* trace_observer = nullptr;

  // Weight streaming (null: experts are read through the mapping). With
  // predict_next, moe_ffn applies the next MoE layer's router (routers[l], one
  // per layer, rows == 0 for dense layers) to this layer's normed input and
  // prefetches the experts it picks; predict_logits/predicted are its scratch.
  stream::ExpertCache* experts = nullptr;
  bool predict_next = false;
  int64_t predict_width = 0;  // experts prefetched per token; 0 = n_used
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
  std::vector<float> xp_latents;              // [key block][kv_lora] cached latents as F32
  std::vector<uint8_t> xp_k_b_t;              // [n_head][nope][kv_lora] k_b transposed (split files)
  std::vector<float> xp_kf, xp_vf;            // [heads][key block][nope], [..][v_head] expanded, before F16
  std::vector<uint16_t> xp_k16, xp_v16;       // [heads][keys][k_head], [..][v_head] as attention reads them
  std::vector<kernels::MatmulTask> xp_tasks;  // [2 n_head]

  ThreadPool* pool = nullptr;
  SequenceState* seqs = nullptr;  // attention cache and recurrent state of every sequence
  kernels::MatmulScratch mm;

  // Every buffer above, once: visit(buffer, n) with the elements `shape`
  // asks of it (0: this model does not use it), or kSizedByContext for the
  // scratch Architecture::context_scratch sizes (xp_*).
  static constexpr int64_t kSizedByContext = -1;
  template <class Visit>
  void for_each_buffer(const BufferShape& shape, Visit&& visit) {
    each_buffer(*this, shape, visit);
  }
  template <class Visit>
  void for_each_buffer(const BufferShape& shape, Visit&& visit) const {
    each_buffer(*this, shape, visit);
  }

 private:
  template <class Self, class Visit>
  static void each_buffer(Self& f, const BufferShape& shape, Visit& visit) {
    static const Hparams kNone;
    const Hparams& hp = shape.hp != nullptr ? *shape.hp : kNone;
    const BufferSizes& bs = shape.widths;
    const int64_t tokens = shape.hp != nullptr ? shape.tokens : 0;
    const auto sz = [tokens](int64_t width) { return tokens * std::max<int64_t>(width, 1); };
    const auto when = [](bool used, int64_t n) { return used ? n : int64_t{0}; };
    visit(f.x, sz(hp.n_embd));
    visit(f.xn, sz(hp.n_embd));
    visit(f.out, sz(hp.n_embd));
    visit(f.q, sz(bs.q));
    visit(f.k, sz(bs.k));
    visit(f.v, sz(bs.v));
    visit(f.att, sz(bs.att));
    visit(f.ff_a, sz(bs.ff));
    visit(f.ff_b, sz(bs.ff));
    visit(f.q16, when(shape.hp != nullptr, int64_t{shape.threads} * std::max(bs.q, bs.k)));
    const bool ckpt = bs.res_checkpoints > 0;
    visit(f.res_ckpt, when(ckpt, sz(bs.res_checkpoints * hp.n_embd)));
    visit(f.res_scores, when(ckpt, sz(bs.res_checkpoints + 1)));
    const bool moe = hp.is_moe();
    const int64_t ew = std::max(hp.n_embd, hp.expert_width());  // expert rows: full or latent width
    visit(f.router, when(moe, sz(hp.n_expert)));
    visit(f.chosen, when(moe, sz(hp.n_expert_used)));
    visit(f.chosen_w, when(moe, sz(hp.n_expert_used)));
    visit(f.expert_count, when(moe, hp.n_expert));
    visit(f.expert_first, when(moe, hp.n_expert));
    visit(f.expert_rows, when(moe, sz(hp.n_expert_used)));
    visit(f.ex_in, when(moe, sz(ew)));
    visit(f.ex_out, when(moe, sz(ew)));
    visit(f.ex_a, when(moe, sz(hp.n_ff_expert)));
    visit(f.ex_b, when(moe, sz(hp.n_ff_expert)));
    visit(f.slot_out, when(moe, sz(hp.n_expert_used * ew)));
    visit(f.moe_latent, when(moe && hp.n_expert_latent > 0, sz(hp.n_expert_latent)));
    visit(f.active, when(moe, 2 * hp.n_expert));
    const bool predict = moe && shape.predict;
    visit(f.predict_logits, when(predict, sz(hp.n_expert)));
    visit(f.predicted, when(predict, hp.n_expert));
    visit(f.routers, when(predict, hp.n_layer));  // one per layer: attach_streaming fills them
    visit(f.seq, tokens);
    visit(f.pos, tokens);
    visit(f.tok, tokens);
    visit(f.xp_latents, kSizedByContext);
    visit(f.xp_k_b_t, kSizedByContext);
    visit(f.xp_kf, kSizedByContext);
    visit(f.xp_vf, kSizedByContext);
    visit(f.xp_k16, kSizedByContext);
    visit(f.xp_v16, kSizedByContext);
    visit(f.xp_tasks, kSizedByContext);
  }
};

}  // namespace ns
