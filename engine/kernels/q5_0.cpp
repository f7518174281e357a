// Q5_0: blocks of 32 5-bit values with an fp16 scale, x = d * (q - 16). The
// low 4 bits are nibbles ordered as in Q4_0; bit j of the little-endian
// uint32 qh is element j's fifth bit. Scalar reference; dotted against Q8_0.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_0 {
namespace {

uint32_t load_qh(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Element j's 5-bit code.
int code(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const uint32_t qh = load_qh(blk + 2);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = static_cast<float>(code(blk + 6, qh, j) - 16) * d;
  }
}

// ggml's quantize_row_q5_0_ref: the value of largest magnitude (with its
// sign) maps to -16, d = max / -16; q = min(31, trunc(x / d + 16.5)).
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
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(blk, float_to_half(d));
    uint32_t qh = 0;
    uint8_t* qs = blk + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f)));
      const int hi = std::min(31, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 16.5f)));
      qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
    }
    std::memcpy(blk + 2, &qh, sizeof qh);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_0::kBlockBytes) {
    const uint32_t qh = load_qh(wb + 2);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
    int32_t sumi = 0;
    for (int j = 0; j < kBlockElems; ++j) sumi += (code(wb + 6, qh, j) - 16) * xq[j];
    sum += load_fp16(wb) * load_fp16(xb) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace ns::kernels::q5_0
