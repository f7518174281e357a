// Q2_K: super-blocks of 256 2-bit values in 16 sub-blocks of 16, each with a
// 4-bit scale and a 4-bit min, and fp16 super-scales d and dmin:
// x = d * sc * q - dmin * m. Layout: kquant.h. Scalar reference; dotted
// against Q8_K, whose bsums give the min term as 16 products.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q2_k {

using L = kq::Q2K;
static_assert(L::bytes == kBlockBytes);

namespace {

// Element 128 h + 32 k + l's level in [0, 3].
int level(const uint8_t* blk, int h, int k, int l) { return (blk[L::qs + 32 * h + l] >> (2 * k)) & 3; }

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    const float dmin = load_fp16(blk + L::dmin);
    const uint8_t* scales = blk + L::scales;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = blk + L::qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[8 * h + 2 * k + half];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * half; l < 16 * half + 16; ++l) *dst++ = dl * static_cast<float>((q[l] >> (2 * k)) & 3) - ml;
        }
      }
    }
  }
}

// ggml's quantize_row_q2_K_ref: per sub-block a (scale, min) fit by
// make_qkx2_quants weighted by |x|, both quantized to 4 bits against their
// largest value, then every value re-quantized with the stored scale and min.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    uint8_t levels[kBlockElems];
    uint8_t aux[16];
    float weights[16], scales[16], mins[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] =
          kq::make_qkx2_quants(16, 3, src + 16 * j, weights, levels + 16 * j, &mins[j], aux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    uint8_t* sc = blk + L::scales;
    if (max_scale > 0) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(kq::nearest_int(iscale * scales[j]));
      store_u16(blk + L::d, float_to_half(max_scale / 15.0f));
    } else {
      for (int j = 0; j < 16; ++j) sc[j] = 0;
      store_u16(blk + L::d, float_to_half(0.0f));
    }
    if (max_min > 0) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(sc[j] | (kq::nearest_int(iscale * mins[j]) << 4));
      store_u16(blk + L::dmin, float_to_half(max_min / 15.0f));
    } else {
      store_u16(blk + L::dmin, float_to_half(0.0f));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = load_fp16(blk + L::d) * static_cast<float>(sc[j] & 0x0f);
      if (d == 0.0f) continue;  // keeps the levels of the fit
      const float dm = load_fp16(blk + L::dmin) * static_cast<float>(sc[j] >> 4);
      for (int i = 0; i < 16; ++i) {
        const int l = kq::nearest_int((src[16 * j + i] + dm) / d);
        levels[16 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : (l > 3 ? 3 : l));
      }
    }
    kq::pack_2bit_planes(levels, blk + L::qs);
  }
}

// Per super-block: the exact integer sum of sc * q * q8 over the 16
// sub-blocks and of m * bsum, then d_x d * isum - d_x dmin * msum (ggml's
// generic kernel).
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const uint8_t* scales = wb + L::scales;
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t msum = 0;
    for (int j = 0; j < 16; ++j) msum += kq::load_i16(xb + kq::Q8K::bsums + 2 * j) * (scales[j] >> 4);
    uint8_t sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(scales[j] & 0x0f);
    const int32_t isum = kq::k16_isum<level>(wb, q8, sc);
    const float dx = kq::load_f32(xb + kq::Q8K::d);
    const float dall = dx * load_fp16(wb + L::d);
    const float dmin = dx * load_fp16(wb + L::dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace ns::kernels::q2_k
