// Multi-head attention with grouped K/V heads (GQA) and RoPE, over the KV cache.
#pragma once

#include "engine/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/model/hparams.h"

namespace ns {

struct GqaWeights {
  kernels::MatrixView wq, wk, wv, wo;
};

// s.xn -> s.out for s.n tokens at positions s.pos0.., appending K/V to layer il of the cache.
void gqa_attention(const GqaWeights& w, const Hparams& hp, int64_t il, ForwardState& s);

// Causal softmax attention for one query head against cached keys/values
// 0..last_pos: out[v_dim] = sum_j softmax(q·k_j * scale)_j v_j. `scores` has room for last_pos+1.
void attend_one_head(const float* q, const float* k_base, int64_t k_stride, const float* v_base, int64_t v_stride,
                     int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* scores, float* out);

}  // namespace ns
