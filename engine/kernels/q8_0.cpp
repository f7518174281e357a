// Q8_0: blocks of 32 int8 with one fp16 scale, x = d * q. Scalar reference.
// Also the activation format Q4_0 and Q8_0 weights are dotted against.
#include "engine/kernels/block32.h"

namespace ns::kernels::q8_0 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q8_0>(src, dst, n); }

// ggml's quantize_row_q8_0_ref: d = amax / 127, q = round(x / d), half away from zero.
void quantize(const float* src, void* dst, int64_t n) { block32::quantize_q8_row<false>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::Q8_0>(w, x, n); }

}  // namespace ns::kernels::q8_0
