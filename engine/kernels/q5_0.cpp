// Q5_0: blocks of 32 5-bit values with an fp16 scale, x = d * (q - 16). The
// low 4 bits are nibbles ordered as in Q4_0; bit j of the little-endian
// uint32 qh is element j's fifth bit. Scalar reference; dotted against Q8_0.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_0 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q5_0>(src, dst, n); }

// ggml's quantize_row_q5_0_ref: block32::quantize_signed with half = 16.
void quantize(const float* src, void* dst, int64_t n) { block32::quantize<block32::Q5_0>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::Q5_0>(w, x, n); }

}  // namespace ns::kernels::q5_0
