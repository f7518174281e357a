// Q5_1: blocks of 32 5-bit values with an fp16 scale d and an fp16 min m,
// x = d * q + m; bits laid out as in Q5_0. Scalar reference; dotted against
// Q8_1, whose block sum s turns the min into one product per block.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_1 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q5_1>(src, dst, n); }

// ggml's quantize_row_q5_1_ref: block32::quantize_affine with 32 levels.
void quantize(const float* src, void* dst, int64_t n) { block32::quantize<block32::Q5_1>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::Q5_1>(w, x, n); }

}  // namespace ns::kernels::q5_1
