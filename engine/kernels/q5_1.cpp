// Q5_1: blocks of 32 5-bit values with an fp16 scale d and an fp16 min m,
// x = d * q + m; bits laid out as in Q5_0. Scalar reference; dotted against
// Q8_1, whose block sum s turns the min into one product per block.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_1 {
namespace {

uint32_t load_qh(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

int code(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const float m = load_fp16(blk + 2);
    const uint32_t qh = load_qh(blk + 4);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = static_cast<float>(code(blk + 8, qh, j)) * d + m;
  }
}

// ggml's quantize_row_q5_1_ref: d = (max - min) / 31, m = min,
// q = trunc((x - min) / d + 0.5) (at most 31 without a clamp).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kBlockElems; ++j) {
      min = std::min(min, src[j]);
      max = std::max(max, src[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    store_u16(blk + 2, float_to_half(min));
    uint32_t qh = 0;
    uint8_t* qs = blk + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      const int hi = static_cast<uint8_t>((src[j + 16] - min) * id + 0.5f);
      qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
    }
    std::memcpy(blk + 4, &qh, sizeof qh);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_1::kBlockBytes) {
    const uint32_t qh = load_qh(wb + 4);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 4);
    int32_t sumi = 0;
    for (int j = 0; j < kBlockElems; ++j) sumi += code(wb + 8, qh, j) * xq[j];
    sum += load_fp16(wb) * load_fp16(xb) * static_cast<float>(sumi) + load_fp16(wb + 2) * load_fp16(xb + 2);
  }
  return sum;
}

}  // namespace ns::kernels::q5_1
