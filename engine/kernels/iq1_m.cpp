// IQ1_M: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 values from an 11-bit index into IQ1_S's grid of -1, 0, 1, each group
// shifted by its own +-1/8, a 3-bit scale per 16 weights, and an fp16
// super-scale spread over the scale words' top nibbles (1.75 bits per
// weight). Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_iq1_m; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq1_m {

using L = iq::Iq1m;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = fp16_table.value[iq::iq1m_d_bits(blk)];
    for (int v = 0; v < 8; ++v) {
      for (int l = 0; l < 4; ++l) {
        const float dl = d * static_cast<float>(iq::iq1m_scale(blk, v, l / 2));
        const float delta = iq::iq1m_negative_delta(blk, v, l) ? -iq::kIq1Delta : iq::kIq1Delta;
        const uint64_t grid = iq::kIq1sGrid[iq::iq1m_index(blk, v, l)];
        for (int j = 0; j < 8; ++j)
          *dst++ = dl * (static_cast<float>(static_cast<int8_t>(iq::grid_byte(grid, j))) + delta);
      }
    }
  }
}

// Per super-block the exact sums of ls * grid * x and of ls * (+-1) * (each
// group's activation sum); d_w d_x (sum + sum_delta / 8).
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t sumi = 0, sumi_delta = 0;
    for (int v = 0; v < 8; ++v) {
      int32_t s[2] = {0, 0}, sd[2] = {0, 0};  // per half of the sub-block (its own scale)
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint64_t grid = iq::kIq1sGrid[iq::iq1m_index(wb, v, l)];
        int32_t gs = 0, xs = 0;
        for (int j = 0; j < 8; ++j) {
          gs += static_cast<int8_t>(iq::grid_byte(grid, j)) * q8[j];
          xs += q8[j];
        }
        s[l / 2] += gs;
        sd[l / 2] += iq::iq1m_negative_delta(wb, v, l) ? -xs : xs;
      }
      const int ls0 = iq::iq1m_scale(wb, v, 0), ls1 = iq::iq1m_scale(wb, v, 1);
      sumi += s[0] * ls0 + s[1] * ls1;
      sumi_delta += sd[0] * ls0 + sd[1] * ls1;
    }
    sum += fp16_table.value[iq::iq1m_d_bits(wb)] * kq::load_f32(xb + kq::Q8K::d) *
           (static_cast<float>(sumi) + iq::kIq1Delta * static_cast<float>(sumi_delta));
  }
  return sum;
}

}  // namespace ns::kernels::iq1_m
