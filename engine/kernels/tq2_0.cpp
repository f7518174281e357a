// TQ2_0: ternary super-blocks of 256 weights, 2 bits each (values 0..2 for
// -1, 0, 1), one fp16 scale (2.06 bits per weight; BitNet-style models).
// Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_tq2_0; dotted against Q8_K in ggml's integer order.
// Read-only in nightshift: the engine only computes with such weights.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::tq2_0 {

using L = iq::Tq2;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *dst++ = static_cast<float>(((blk[L::qs + 32 * h + m] >> (2 * l)) & 3) - 1) * d;
  }
}

// Per super-block the exact sum of (q - 1) * x, times d_x d_w.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t s = 0;
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) s += *q8++ * (((wb[L::qs + 32 * h + m] >> (2 * l)) & 3) - 1);
    sum += static_cast<float>(s) * (kq::load_f32(xb + kq::Q8K::d) * load_fp16(wb + L::d));
  }
  return sum;
}

}  // namespace ns::kernels::tq2_0
