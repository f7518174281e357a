// Feed-forward blocks: the dense SwiGLU FFN and the routed mixture of experts.
#pragma once

#include "engine/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/model/tensor_loader.h"

namespace ns {

struct FfnWeights {
  kernels::MatrixView gate, up, down;
};

// out[m][n_embd] = down(silu(gate(in)) * up(in)) for m rows of in; a, b are [m][n_ff] scratch.
void swiglu(const FfnWeights& w, const float* in, int64_t m, float* a, float* b, float* out, ForwardState& s);

enum class ExpertGating { softmax, sigmoid };

struct MoeWeights {
  kernels::MatrixView router;          // [n_expert rows][n_embd]
  ExpertsView gate, up, down;
  int64_t n_used = 0;
  bool normalize_weights = true;       // renormalize the chosen experts' weights to sum to 1
  ExpertGating gating = ExpertGating::softmax;
};

// s.xn -> s.out: route every token to its top n_used experts, then run each
// expert once over all the tokens routed to it (expert-major) and scatter the
// weighted results back.
void moe_ffn(const MoeWeights& w, ForwardState& s);

}  // namespace ns
