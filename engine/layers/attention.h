// Multi-head attention with grouped K/V heads (GQA) and RoPE, over the KV cache.
//
// The arithmetic is that of the reference's CPU backend without flash
// attention (how the goldens in shared/models/goldens were made: llama.cpp
// reproduces them to the printed digit only with flash attention off):
//   scores = K·Q with Q rounded to F16 (tinyBLAS F16 GEMM: 8 float lanes over
//   head_dim, then a fixed horizontal sum), softmax with ggml's vectorized exp
//   summed in double per 8 lanes, probabilities rounded to F16, and
//   out = V·P with the same 8-lane accumulation over positions. On an AVX-512
//   CPU (kernels::active_isa) every "8" is 16, the exp AVX-512's and the
//   horizontal sum _mm512_reduce_add_ps's, as the reference built there
//   (issue 34, docs/models.md).
// Matching it bit for bit matters because the next matmul re-quantizes the
// output to 8 bits: a one-ulp difference can flip a value and move logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/layers/yarn_rope.h"
#include "engine/spec/hparams.h"
#include "engine/spec/tensor_table.h"

namespace ns {

struct GqaWeights {
  kernels::MatrixView wq, wk, wv, wo;
  // The fused projection attn_qkv ([n_head + 2 n_head_kv] * head_dim rows: Q,
  // then K, then V), in place of wq/wk/wv when rows > 0 (bailingmoe2). Its
  // product lands in s.q, which the architecture sizes for all three
  // (BufferSizes::q), and is split into s.q, s.k, s.v.
  kernels::MatrixView wqkv;
};

// s.xn -> s.out for s.n tokens at (s.seq[t], s.pos[t]), appending K/V to layer il of the cache.
void gqa_attention(const GqaWeights& w, const Hparams& hp, int64_t il, ForwardState& s);

// Every (token, head) of the batch attending over layer il's cache (K and V
// already written for these tokens): query head h of token t is the hd floats
// at q[t * q_stride + h * q_head_stride]; it reads KV head h / (n_head / n_kv)
// of the [n_kv * hd]-wide cache rows; out[t][n_head * hd]. Threads over
// (token, head) pairs; each rounds its query to F16 in s.q16.
void attend_cached(const float* q, int64_t q_stride, int64_t q_head_stride, int64_t n_head, int64_t n_kv, int64_t hd,
                   float scale, int64_t il, ForwardState& s, float* out);
// The qwen/GLM variant: Q/K/V biases and RMS norms of Q and K (every vector
// optional, empty = absent) applied before a rotation by `rope` (yarn_rope.h:
// partial, NEOX, YaRN). A norm spans its weight's width: [head_dim], each head
// on its own with the weight shared by all heads (qwen, GLM), or the whole
// [n_head * head_dim] row at once (minimax-m2's full-width norms).
struct GqaExtras {
  std::vector<float> bq, bk, bv;
  std::vector<float> q_norm, k_norm;
};
void gqa_attention(const GqaWeights& w, const GqaExtras& x, const Hparams& hp, const RopeParams& rope, int64_t il,
                   ForwardState& s);
// That gqa_attention in its two halves, for an architecture that chooses
// between them which cached positions each query reads (minimax-m3's sparse
// attention): s.xn -> s.q, s.k, s.v (projected, biased, normed, rotated) ...
void gqa_project(const GqaWeights& w, const GqaExtras& x, const Hparams& hp, const RopeParams& rope, ForwardState& s);
// ... then K/V into layer il's cache rows (the first n_head_kv * head_dim
// values of each; a wider row keeps the architecture's own after them), each
// query head over its group's cached keys and values, and the output
// projection into s.out. keep: null, every position 0..pos; else
// keep[t * n_head_kv + kv_head] is null (all) or a 0/1 mask over positions
// 0..pos (AttendSpan::keep) for that token's heads of that group.
void gqa_attend(const kernels::MatrixView& wo, const Hparams& hp, int64_t il, ForwardState& s,
                const uint8_t* const* keep = nullptr);

// The table entries (spec/tensor_table.h) of GQA attention at layer prefix p
// ("blk.N.") with hp's head counts and size: attn_q, attn_k, attn_v, then
// (with `biases`, in x) attn_{q,k,v}.bias of that presence, then attn_output.
void gqa_tensors(TensorTable& t, const std::string& p, const Hparams& hp, GqaWeights& w, GqaExtras* x = nullptr,
                 Presence biases = Presence::optional);
// The fused form's projection: attn_qkv (into w.wqkv); attn_output is the
// architecture's to list where its files have it.
void gqa_fused_qkv_tensor(TensorTable& t, const std::string& p, const Hparams& hp, GqaWeights& w);
// s.q's width for the fused form: Q, K and V of a token side by side.
inline int64_t gqa_fused_qkv_width(const Hparams& hp) { return (hp.n_head + 2 * hp.n_head_kv) * hp.head_dim; }

// Causal softmax attention of one query head over F16 cached keys/values at
// positions 0..last_pos: out[v_dim] = sum_j softmax(q·k_j * scale)_j v_j,
// computed as described above. q16 is the query already rounded to F16; key
// and value rows of position j start at k_base + j * k_stride and
// v_base + j * v_stride. Its working memory is per thread and grows with the
// longest context seen, so a warm token loop does not allocate.
void attend_one_head(const uint16_t* q16, const uint16_t* k_base, int64_t k_stride, const uint16_t* v_base,
                     int64_t v_stride, int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* out);

// What attend_one_head sees beyond a causal prefix (gpt-oss):
//   first_pos: positions before it are masked (a sliding window). As in the
//     reference, where masked cells score -inf, the live positions keep their
//     place in the lane sums (lane = position mod 8, or 16) and the masked ones add
//     exact zeros, so the result is the same as over the full row.
//   ring: the rows are a ring of this many rows (a multiple of 8): position j
//     is row j mod ring. 0: position j is row j.
//   sink: a learned logit of this head that joins the softmax's max and sum
//     (the reference adds expf(sink - max) to the sum) but has no value row,
//     so the weights sum to less than 1. Null: none.
//   keep: DeepSeek sparse attention's selection, keep[j] != 0 for the
//     positions j (0..last_pos, not ring rows) attended to; the others score
//     -inf as the reference's mask makes them (weight exactly 0, their lanes
//     add exact zeros). Null: all.
struct AttendSpan {
  int64_t first_pos = 0;
  int64_t ring = 0;
  const float* sink = nullptr;
  const uint8_t* keep = nullptr;
};
void attend_one_head(const uint16_t* q16, const uint16_t* k_base, int64_t k_stride, const uint16_t* v_base,
                     int64_t v_stride, int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* out,
                     const AttendSpan& span);

// One query head over a softmax row of columns (the reference's cells, which
// give each key its lane: column mod 8, or 16) whose rows lie in several
// places: deepseek4 concatenates a layer's raw keys and its compressed blocks
// into one K (= V), so a block's lane follows its index after the raw cells.
// Run i covers columns [col, col + count), its rows k + c * k_stride and
// v + c * v_stride; runs in column order and disjoint, at least one. Columns
// between runs are masked (weight exactly 0, their lanes add exact zeros);
// `sink` as in AttendSpan. Computed as attend_one_head (the same bits for the
// same columns and rows).
struct AttendRun {
  int64_t col = 0, count = 0;
  const uint16_t* k = nullptr;
  int64_t k_stride = 0;
  const uint16_t* v = nullptr;
  int64_t v_stride = 0;
};
void attend_runs(const uint16_t* q16, const std::vector<AttendRun>& runs, int64_t qk_dim, int64_t v_dim, float scale,
                 const float* sink, float* out);

}  // namespace ns
