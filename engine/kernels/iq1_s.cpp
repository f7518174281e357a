// IQ1_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 values from an 11-bit index into a 2048-entry grid of -1, 0, 1, shifted
// by +-1/8 per sub-block and scaled by a 3-bit sub-block scale; one fp16
// super-scale (1.56 bits per weight). Layout: iquant.h. Scalar reference,
// bit-exact with ggml's dequantize_row_iq1_s; dotted against Q8_K in ggml's
// integer order, the shift through the activations' bsums.
// Read-only: quantizing needs ggml's importance-matrix grid search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq1_s {

using L = iq::Iq1s;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int v = 0; v < 8; ++v) {
      const uint16_t qh = iq::iq1s_qh(blk, v);
      const float dl = d * static_cast<float>(iq::iq1s_scale(qh));
      const float delta = iq::iq1s_negative_delta(qh) ? -iq::kIq1Delta : iq::kIq1Delta;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = iq::kIq1sGrid[iq::iq1s_index(blk, v, l)];
        for (int j = 0; j < 8; ++j)
          *dst++ = dl * (static_cast<float>(static_cast<int8_t>(iq::grid_byte(grid, j))) + delta);
      }
    }
  }
}

// Per super-block the exact sums of ls * grid * x and of ls * (+-1) * (the
// sub-block's activation sum, from bsums); d_w d_x (sum + sum_delta / 8).
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t sumi = 0, sumi_delta = 0;
    for (int v = 0; v < 8; ++v) {
      const uint16_t qh = iq::iq1s_qh(wb, v);
      const int ls = iq::iq1s_scale(qh);
      int32_t s = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint64_t grid = iq::kIq1sGrid[iq::iq1s_index(wb, v, l)];
        for (int j = 0; j < 8; ++j) s += static_cast<int8_t>(iq::grid_byte(grid, j)) * q8[j];
      }
      const int32_t xsum = kq::load_i16(xb + kq::Q8K::bsums + 4 * v) + kq::load_i16(xb + kq::Q8K::bsums + 4 * v + 2);
      sumi += ls * s;
      sumi_delta += (iq::iq1s_negative_delta(qh) ? -ls : ls) * xsum;
    }
    sum += load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d) *
           (static_cast<float>(sumi) + iq::kIq1Delta * static_cast<float>(sumi_delta));
  }
  return sum;
}

}  // namespace ns::kernels::iq1_s
