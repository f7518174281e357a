// Q4_0: blocks of 32 4-bit values with one fp16 scale, x = d * (nibble - 8).
// Element j < 16 sits in the low nibble of byte j, element j + 16 in its high
// nibble. Scalar reference; dotted against Q8_0 activations.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_0 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q4_0>(src, dst, n); }

// ggml's quantize_row_q4_0_ref: block32::quantize_signed with half = 8.
void quantize(const float* src, void* dst, int64_t n) { block32::quantize<block32::Q4_0>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::Q4_0>(w, x, n); }

}  // namespace ns::kernels::q4_0
