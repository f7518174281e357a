// Q8_1: blocks of 32 int8 with an fp16 scale d and an fp16 s = d * sum(q),
// x = d * q. Only ever holds activations: Q4_1 and Q5_1 weights are dotted
// against it, and s carries the activations' block sum that their min needs.
// Scalar reference.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q8_1 {

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::Q8_1>(src, dst, n); }

// ggml's quantize_row_q8_1_ref: as Q8_0 (d = amax / 127, round half away
// from zero), plus s = fp16(sum(q) * d).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int sum;
    const float d = block32::quantize_q8(src, reinterpret_cast<int8_t*>(blk + 4), &sum);
    store_u16(blk, float_to_half(d));
    store_u16(blk + 2, float_to_half(static_cast<float>(sum) * d));
  }
}

}  // namespace ns::kernels::q8_1
