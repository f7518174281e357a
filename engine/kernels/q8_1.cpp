// Q8_1: blocks of 32 int8 with an fp16 scale d and an fp16 s = d * sum(q),
// x = d * q. Only ever holds activations: Q4_1 and Q5_1 weights are dotted
// against it, and s carries the activations' block sum that their min needs.
// Scalar reference.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q8_1 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const auto* q = reinterpret_cast<const int8_t*>(blk + 4);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = d * static_cast<float>(q[j]);
  }
}

// ggml's quantize_row_q8_1_ref: as Q8_0 (d = amax / 127, round half away
// from zero), plus s = fp16(sum(q) * d).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float amax = 0;
    for (int j = 0; j < kBlockElems; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    auto* q = reinterpret_cast<int8_t*>(blk + 4);
    int sum = 0;
    for (int j = 0; j < kBlockElems; ++j) {
      q[j] = static_cast<int8_t>(std::round(src[j] * id));
      sum += q[j];
    }
    store_u16(blk + 2, float_to_half(static_cast<float>(sum) * d));
  }
}

}  // namespace ns::kernels::q8_1
