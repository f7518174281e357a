// Cross-layer attention residuals (kimi-k3, attn_res.block_size > 0): instead
// of reading the residual stream as it is, a layer reads a per-token softmax
// mix of the layer inputs banked so far ("checkpoints") and the current stream:
//
//   score(v) = sum_i rms_norm(v)_i * w_i      (w: attn_res_score, ffn_res_score or output_res_score)
//   p        = softmax(score(ckpt_0), ..., score(ckpt_{n-1}), score(cur))
//   mix      = sum_c p_c * ckpt_c + p_cur * cur   (the raw vectors, not the normed ones)
//
// In the reference's float order (src/models/kimi-k3.cpp res_mix: rms_norm,
// mul, sum_rows, soft_max; ggml_dsv4_hc_pre's float sum over the checkpoints,
// then + p_cur * cur). The layer order that banks and mixes is the
// architecture's (engine/arch/kimi_k3.cpp).
#pragma once

#include <cstdint>

#include "engine/state/forward_state.h"

namespace ns {

// One token: ckpt is [n_ckpt][d] (n_ckpt may be 0: out = cur), scores is
// [n_ckpt + 1] scratch; out may be cur.
void res_mix(const float* ckpt, int64_t n_ckpt, const float* cur, const float* score_w, int64_t d, float eps,
             float* scores, float* out);

// Every token of s: s.x -> out (s.n rows of d) with the first n_ckpt
// checkpoints of s.res_ckpt (max_ckpt per token), over the thread pool.
void res_mix_all(ForwardState& s, int64_t n_ckpt, int64_t max_ckpt, const float* score_w, int64_t d, float eps,
                 float* out);

}  // namespace ns
