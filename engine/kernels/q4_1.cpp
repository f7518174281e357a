// Q4_1: blocks of 32 4-bit values with an fp16 scale d and an fp16 min m,
// x = d * nibble + m; nibbles ordered as in Q4_0. Scalar reference; dotted
// against Q8_1, whose block sum s turns the min into one product per block.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_1 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q4_1>(src, dst, n); }

// ggml's quantize_row_q4_1_ref: block32::quantize_affine with 16 levels.
void quantize(const float* src, void* dst, int64_t n) { block32::quantize<block32::Q4_1>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::Q4_1>(w, x, n); }

}  // namespace ns::kernels::q4_1
