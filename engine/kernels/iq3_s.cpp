// IQ3_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 8 groups of
// 4 magnitudes from a 9-bit index into a 512-entry grid, 8 explicit sign
// bits per 8 weights and a 4-bit scale per sub-block; one fp16 super-scale
// (3.44 bits per weight). Layout: iquant.h. Scalar reference, bit-exact with
// ggml's dequantize_row_iq3_s; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq3_s {

using L = iq::Iq3s;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int v = 0; v < 8; ++v) {
      const float db = d * static_cast<float>(iq::iq3s_scale(blk, v));
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = iq::iq3s_signs(blk, v, l);
        for (int j = 0; j < 8; ++j) {
          const uint32_t grid = iq::kIq3sGrid[iq::iq3s_index(blk, v, 2 * l + j / 4)];
          *dst++ = db * static_cast<float>(iq::grid_byte(grid, j % 4)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
        }
      }
    }
  }
}

// Per super-block the exact sum of ls * w * x, ls = 2s + 1, then d_w d_x * sum
// into the float total.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const float d = load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t bsum = 0;
    for (int v = 0; v < 8; ++v) {
      int32_t s = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint8_t signs = iq::iq3s_signs(wb, v, l);
        for (int j = 0; j < 8; ++j) {
          const uint32_t grid = iq::kIq3sGrid[iq::iq3s_index(wb, v, 2 * l + j / 4)];
          const int p = iq::grid_byte(grid, j % 4) * q8[j];
          s += (signs >> j) & 1 ? -p : p;
        }
      }
      bsum += s * iq::iq3s_scale(wb, v);
    }
    sum += d * static_cast<float>(bsum);
  }
  return sum;
}

}  // namespace ns::kernels::iq3_s
