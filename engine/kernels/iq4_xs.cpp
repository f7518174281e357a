// IQ4_XS: super-blocks of 256 4-bit indices into IQ4_NL's 16 non-linear
// levels, in 8 sub-blocks of 32 with 6-bit scales (stored +32) and one fp16
// super-scale (4.25 bits per weight). Layout: iquant.h. Scalar reference,
// bit-exact with ggml's dequantize_row_iq4_xs; dotted against Q8_K in ggml's
// order (one float product per sub-block).
// Read-only here: its ggml quantizer is an importance-weighted search.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq4_xs {

using L = iq::Iq4xs;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    for (int v = 0; v < 8; ++v, dst += 32) {
      const float dl = d * static_cast<float>(iq::iq4xs_scale(blk, v));
      const uint8_t* qs = blk + L::qs + 16 * v;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(iq4_nl::kValues[qs[j] & 0x0f]);
        dst[j + 16] = dl * static_cast<float>(iq4_nl::kValues[qs[j] >> 4]);
      }
    }
  }
}

// Per sub-block the exact integer sum, then d_w d_x (ls - 32) * sum into the
// float total.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const float d = load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    for (int v = 0; v < 8; ++v, q8 += 32) {
      const uint8_t* qs = wb + L::qs + 16 * v;
      int32_t s = 0;
      for (int j = 0; j < 16; ++j)
        s += q8[j] * iq4_nl::kValues[qs[j] & 0x0f] + q8[j + 16] * iq4_nl::kValues[qs[j] >> 4];
      sum += d * static_cast<float>(iq::iq4xs_scale(wb, v)) * static_cast<float>(s);
    }
  }
  return sum;
}

}  // namespace ns::kernels::iq4_xs
