// IQ2_XXS: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups
// of 8 magnitudes from an 8-bit index into a 256-entry grid, 7 sign bits per
// group and a 4-bit sub-block scale; one fp16 super-scale (2.06 bits per
// weight). Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_iq2_xxs; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq2_xxs {

using L = iq::Iq2xxs;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int v = 0; v < 8; ++v) {
      const uint32_t word = iq::iq2xxs_signs_scale(blk, v);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = iq::kIq2xxsGrid[iq::iq2xxs_index(blk, v, l)];
        const uint8_t signs = iq::signs7(word, l);
        for (int j = 0; j < 8; ++j)
          *dst++ = db * static_cast<float>(iq::grid_byte(grid, j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// Per super-block the exact sum of ls * w * x with ls = 2s + 1, then
// d_w d_x * sum into the float total, which is scaled by 1/8 at the end.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const float d = load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t bsum = 0;
    for (int v = 0; v < 8; ++v) {
      const uint32_t word = iq::iq2xxs_signs_scale(wb, v);
      int32_t s = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint64_t grid = iq::kIq2xxsGrid[iq::iq2xxs_index(wb, v, l)];
        const uint8_t signs = iq::signs7(word, l);
        for (int j = 0; j < 8; ++j) {
          const int p = iq::grid_byte(grid, j) * q8[j];
          s += (signs >> j) & 1 ? -p : p;
        }
      }
      bsum += s * static_cast<int32_t>(2 * (word >> 28) + 1);
    }
    sum += d * static_cast<float>(bsum);
  }
  return 0.125f * sum;
}

}  // namespace ns::kernels::iq2_xxs
