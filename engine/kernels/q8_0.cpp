// Q8_0: blocks of 32 int8 with one fp16 scale, x = d * q. Scalar reference.
// Also the activation format Q4_0 and Q8_0 weights are dotted against.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q8_0 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = d * static_cast<float>(q[j]);
  }
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, q = round(x / d), half away from zero.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float amax = 0;
    for (int j = 0; j < kBlockElems; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    auto* q = reinterpret_cast<int8_t*>(blk + 2);
    for (int j = 0; j < kBlockElems; ++j) q[j] = static_cast<int8_t>(std::round(src[j] * id));
  }
}

// Exact integer sum per block, then one scale per block (ggml's order).
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += kBlockBytes) {
    const auto* wq = reinterpret_cast<const int8_t*>(wb + 2);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
    int32_t sumi = 0;
    for (int j = 0; j < kBlockElems; ++j) sumi += wq[j] * xq[j];
    sum += static_cast<float>(sumi) * (load_fp16(wb) * load_fp16(xb));
  }
  return sum;
}

}  // namespace ns::kernels::q8_0
