// The pre-norm residual block every architecture here is built from:
//   s.x += f(rms_norm(s.x) * norm)
// where f reads s.xn and writes s.out for the batch's s.n tokens, and the
// attention-then-FFN layer made of two of them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/state/ops.h"

namespace ns {

template <class Block>
void pre_norm_residual(ForwardState& s, const std::vector<float>& norm, int64_t n_embd, float eps, Block&& block) {
  for (int64_t t = 0; t < s.n; ++t) ops::rms_norm(&s.x[t * n_embd], norm.data(), n_embd, eps, &s.xn[t * n_embd]);
  block();
  ops::add(s.x.data(), s.out.data(), s.n * n_embd);
}

// The layer most architectures here are (llama, deepseek2, qwen*moe, glm4moe):
//   s.x += attention(rms_norm(s.x) * attn_norm)
//   s.x += ffn(rms_norm(s.x) * ffn_norm)
// each block reading s.xn and writing s.out, as in pre_norm_residual.
template <class Attention, class Ffn>
void attention_ffn_layer(ForwardState& s, const std::vector<float>& attn_norm, const std::vector<float>& ffn_norm,
                         int64_t n_embd, float eps, Attention&& attention, Ffn&& ffn) {
  pre_norm_residual(s, attn_norm, n_embd, eps, attention);
  pre_norm_residual(s, ffn_norm, n_embd, eps, ffn);
}

}  // namespace ns
