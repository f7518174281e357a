// Q1_0: blocks of 128 sign bits with one fp16 scale, x = bit ? d : -d; bit
// j % 8 of byte j / 8 is element j. Scalar reference; dotted against Q8_0 as
// in ggml, whose generic vec_dot this follows: four activation blocks per
// weight block, each block's exact sum scaled by its own d_x into a float
// partial, which is then scaled by d_w.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/q8_0_groups.h"

namespace ns::kernels::q1_0 {
namespace {
struct Format {
  static constexpr int64_t kBlockElems = q1_0::kBlockElems;
  static constexpr size_t kBlockBytes = q1_0::kBlockBytes;
  static int code(const uint8_t* blk, int j) { return (blk[2 + j / 8] >> (j % 8)) & 1 ? 1 : -1; }
};
}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = Format::code(blk, j) > 0 ? d : -d;
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

float vec_dot(const void* w, const void* x, int64_t n) { return dot_over_q8_0_blocks<Format>(w, x, n); }

}  // namespace ns::kernels::q1_0
