// Q1_0: blocks of 128 sign bits with one fp16 scale, x = bit ? d : -d; bit
// j % 8 of byte j / 8 is element j. Scalar reference; dotted against Q8_0 as
// in ggml, whose generic vec_dot this follows: four activation blocks per
// weight block, each block's exact sum scaled by its own d_x into a float
// partial, which is then scaled by d_w.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q1_0 {
namespace {
constexpr int kActBlocks = kBlockElems / q8_0::kBlockElems;
}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const uint8_t* qs = blk + 2;
    for (int j = 0; j < kBlockElems; ++j) dst[j] = (qs[j / 8] >> (j % 8)) & 1 ? d : -d;
  }
}

// ggml's quantize_row_q1_0_ref: d is the mean magnitude (a float sum in
// element order, divided by 128), each bit the sign (set for x >= 0, -0
// included; NaN clear).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float sum_abs = 0;
    for (int j = 0; j < kBlockElems; ++j) sum_abs += std::fabs(src[j]);
    store_u16(blk, float_to_half(sum_abs / static_cast<float>(kBlockElems)));
    uint8_t* qs = blk + 2;
    for (int j = 0; j < kBlockElems / 8; ++j) qs[j] = 0;
    for (int j = 0; j < kBlockElems; ++j)
      if (src[j] >= 0.0f) qs[j / 8] = static_cast<uint8_t>(qs[j / 8] | 1 << (j % 8));
  }
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes) {
    float partial = 0;
    for (int k = 0; k < kActBlocks; ++k, xb += q8_0::kBlockBytes) {
      const uint8_t* bits = wb + 2 + 4 * k;
      const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
      int32_t sumi = 0;
      for (int j = 0; j < q8_0::kBlockElems; ++j) sumi += (bits[j / 8] >> (j % 8)) & 1 ? xq[j] : -xq[j];
      partial += load_fp16(xb) * static_cast<float>(sumi);
    }
    sum += load_fp16(wb) * partial;
  }
  return sum;
}

}  // namespace ns::kernels::q1_0
