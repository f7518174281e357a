// IQ2_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 magnitudes from a 10-bit index into a 1024-entry grid, 8 explicit sign
// bits per group and two 4-bit scales per sub-block (one per 16 weights);
// one fp16 super-scale (2.56 bits per weight). Layout: iquant.h. Scalar
// reference, bit-exact with ggml's dequantize_row_iq2_s; dotted against Q8_K
// in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq2_s {

using L = iq::Iq2s;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int v = 0; v < 8; ++v) {
      for (int l = 0; l < 4; ++l) {
        const float db = d * (0.5f + static_cast<float>(iq::iq2_half_scale(blk + L::scales, v, l / 2))) * 0.25f;
        const uint64_t grid = iq::kIq2sGrid[iq::iq2s_index(blk, v, l)];
        const uint8_t signs = iq::iq2s_signs(blk, v, l);
        for (int j = 0; j < 8; ++j)
          *dst++ = db * static_cast<float>(iq::grid_byte(grid, j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// Per super-block the exact sum of ls * w * x, ls = 2s + 1 per half
// sub-block, then d_w d_x * sum into the float total, scaled by 1/8 at the end.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const float d = load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t bsum = 0;
    for (int v = 0; v < 8; ++v) {
      for (int half = 0; half < 2; ++half) {
        int32_t s = 0;
        for (int l = 2 * half; l < 2 * half + 2; ++l, q8 += 8) {
          const uint64_t grid = iq::kIq2sGrid[iq::iq2s_index(wb, v, l)];
          const uint8_t signs = iq::iq2s_signs(wb, v, l);
          for (int j = 0; j < 8; ++j) {
            const int p = iq::grid_byte(grid, j) * q8[j];
            s += (signs >> j) & 1 ? -p : p;
          }
        }
        bsum += s * (2 * iq::iq2_half_scale(wb + L::scales, v, half) + 1);
      }
    }
    sum += d * static_cast<float>(bsum);
  }
  return 0.125f * sum;
}

}  // namespace ns::kernels::iq2_s
