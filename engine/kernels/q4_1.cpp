// Q4_1: blocks of 32 4-bit values with an fp16 scale d and an fp16 min m,
// x = d * nibble + m; nibbles ordered as in Q4_0. Scalar reference; dotted
// against Q8_1, whose block sum s turns the min into one product per block.
#include <algorithm>
#include <cfloat>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_1 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const float m = load_fp16(blk + 2);
    const uint8_t* qs = blk + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// ggml's quantize_row_q4_1_ref: d = (max - min) / 15, m = min,
// q = min(15, trunc((x - min) / d + 0.5)).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kBlockElems; ++j) {
      min = std::min(min, src[j]);
      max = std::max(max, src[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    store_u16(blk + 2, float_to_half(min));
    uint8_t* qs = blk + 4;
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - min) * id + 0.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>((src[j + 16] - min) * id + 0.5f)));
      qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Per block: d_w d_x sum(q_w q_x) + m_w s_x, as ggml's generic kernel.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_1::kBlockBytes) {
    const uint8_t* qs = wb + 4;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 4);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += (qs[j] & 0x0f) * xq[j] + (qs[j] >> 4) * xq[j + 16];
    sum += load_fp16(wb) * load_fp16(xb) * static_cast<float>(sumi) + load_fp16(wb + 2) * load_fp16(xb + 2);
  }
  return sum;
}

}  // namespace ns::kernels::q4_1
