// Q8_1: blocks of 32 int8 with an fp16 scale d and an fp16 s = d * sum(q),
// x = d * q. Only ever holds activations: Q4_1 and Q5_1 weights are dotted
// against it, and s carries the activations' block sum that their min needs.
// Scalar reference.
#include "engine/kernels/block32.h"

namespace ns::kernels::q8_1 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q8_1>(src, dst, n); }

// ggml's quantize_row_q8_1_ref: as Q8_0 (d = amax / 127, round half away
// from zero), plus s = fp16(sum(q) * d).
void quantize(const float* src, void* dst, int64_t n) { block32::quantize_q8_row<true>(src, dst, n); }

}  // namespace ns::kernels::q8_1
