// Q4_0: blocks of 32 4-bit values with one fp16 scale, x = d * (nibble - 8).
// Element j < 16 sits in the low nibble of byte j, element j + 16 in its high
// nibble. Scalar reference; dotted against Q8_0 activations.
#include <algorithm>
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_0 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const uint8_t* qs = blk + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      dst[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// ggml's quantize_row_q4_0_ref: the value of largest magnitude (with its sign)
// maps to -8, so d = max / -8; q = min(15, trunc(x / d + 8.5)).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float amax = 0, max = 0;
    for (int j = 0; j < kBlockElems; ++j) {
      if (amax < std::fabs(src[j])) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    uint8_t* qs = blk + 2;
    for (int j = 0; j < 16; ++j) {
      // The int8 truncation is ggml's: it rounds x / d + 8 half-up in [0, 16].
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 8.5f)));
      qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_0::kBlockBytes) {
    const uint8_t* qs = wb + 2;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += ((qs[j] & 0x0f) - 8) * xq[j] + ((qs[j] >> 4) - 8) * xq[j + 16];
    sum += static_cast<float>(sumi) * (load_fp16(wb) * load_fp16(xb));
  }
  return sum;
}

}  // namespace ns::kernels::q4_0
