// Q2_0: blocks of 64 2-bit codes with one fp16 scale, x = d * (q - 1), so
// the levels are -d, 0, d, 2d; element j's code is bits 2 (j % 4) of byte
// j / 4. Scalar reference; dotted against Q8_0 as in ggml, whose generic
// vec_dot (the one its x86 build runs) this follows: two activation blocks
// per weight block, each block's exact sum scaled by its own d_x into a float
// partial, which is then scaled by d_w.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/q8_0_groups.h"

namespace ns::kernels::q2_0 {
namespace {
struct Format {
  static constexpr int64_t kBlockElems = q2_0::kBlockElems;
  static constexpr size_t kBlockBytes = q2_0::kBlockBytes;
  static int code(const uint8_t* blk, int j) { return ((blk[2 + j / 4] >> (2 * (j % 4))) & 3) - 1; }
};
}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = static_cast<float>(Format::code(blk, j)) * d;
  }
}

// ggml's quantize_row_q2_0_ref: d is the largest magnitude, each code
// round(x / d) + 1 (half away from zero, in float with the unrounded d),
// clamped to [0, 3]; as x / d lies in [-1, 1], code 3 (2d) is never chosen.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    float amax = 0;
    for (int j = 0; j < kBlockElems; ++j)
      if (std::fabs(src[j]) > amax) amax = std::fabs(src[j]);
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    store_u16(blk, float_to_half(amax));
    uint8_t* qs = blk + 2;
    for (int j = 0; j < kBlockElems / 4; ++j) qs[j] = 0;
    for (int j = 0; j < kBlockElems; ++j) {
      int q = static_cast<int>(std::round(src[j] * id)) + 1;
      q = q < 0 ? 0 : q > 3 ? 3 : q;
      qs[j / 4] = static_cast<uint8_t>(qs[j / 4] | q << (2 * (j % 4)));
    }
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return dot_over_q8_0_blocks<Format>(w, x, n); }

}  // namespace ns::kernels::q2_0
