// The scalar dot of the weight formats whose blocks span several Q8_0
// activation blocks with one fp16 scale (Q1_0, Q2_0), in ggml's generic
// order: each activation block's exact integer sum times its d_x is added to
// a float partial, and d_w times the partial to the total. Only the scalar
// reference files include this; the function is static, one copy per file.
#pragma once

#include "engine/kernels/formats.h"

namespace ns::kernels {

// F supplies kBlockElems, kBlockBytes and code(blk, j): element j's integer
// weight in the block at blk (its fp16 d at blk[0..1]).
template <class F>
static float dot_over_q8_0_blocks(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / F::kBlockElems; ++b, wb += F::kBlockBytes) {
    float partial = 0;
    for (int k = 0; k < F::kBlockElems / q8_0::kBlockElems; ++k, xb += q8_0::kBlockBytes) {
      const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
      int32_t sumi = 0;
      for (int j = 0; j < q8_0::kBlockElems; ++j) sumi += F::code(wb, 32 * k + j) * xq[j];
      partial += load_fp16(xb) * static_cast<float>(sumi);
    }
    sum += load_fp16(wb) * partial;
  }
  return sum;
}

}  // namespace ns::kernels
