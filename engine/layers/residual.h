// The pre-norm residual block every architecture here is built from:
//   s.x += f(rms_norm(s.x) * norm)
// where f reads s.xn and writes s.out for the batch's s.n tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/forward_state.h"
#include "engine/ops.h"

namespace ns {

template <class Block>
void pre_norm_residual(ForwardState& s, const std::vector<float>& norm, int64_t n_embd, float eps, Block&& block) {
  for (int64_t t = 0; t < s.n; ++t) ops::rms_norm(&s.x[t * n_embd], norm.data(), n_embd, eps, &s.xn[t * n_embd]);
  block();
  ops::add(s.x.data(), s.out.data(), s.n * n_embd);
}

}  // namespace ns
