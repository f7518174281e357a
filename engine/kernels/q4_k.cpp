// Q4_K: super-blocks of 256 4-bit values in 8 sub-blocks of 32, each with a
// 6-bit scale and a 6-bit min, and fp16 super-scales d and dmin:
// x = d * sc * q - dmin * m. Layout: kquant.h. Scalar reference; dotted
// against Q8_K, whose bsums give the min term as 8 products.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q4_k {

using L = kq::Q4K;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    const float dmin = load_fp16(blk + L::dmin);
    uint8_t sc[8], mn[8];
    kq::unpack_k4_scales(blk + L::scales, sc, mn);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = blk + L::qs + 32 * c;
      const float d1 = d * static_cast<float>(sc[2 * c]), m1 = dmin * static_cast<float>(mn[2 * c]);
      const float d2 = d * static_cast<float>(sc[2 * c + 1]), m2 = dmin * static_cast<float>(mn[2 * c + 1]);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// ggml's quantize_row_q4_K_ref: per sub-block a (scale, min) fit by
// make_qkx2_quants weighted by rms + |x|, both quantized to 6 bits against
// their largest value, then every value re-quantized with the stored pair.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    uint8_t levels[kBlockElems];
    uint8_t aux[32];
    float weights[32], scales[8], mins[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* x = src + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[l]);
      scales[j] = kq::make_qkx2_quants(32, 15, x, weights, levels + 32 * j, &mins[j], aux, -1.0f, 0.1f, 20, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t* packed = blk + L::scales;
    for (int j = 0; j < 8; ++j) {
      auto ls = static_cast<uint8_t>(kq::nearest_int(inv_scale * scales[j]));
      auto lm = static_cast<uint8_t>(kq::nearest_int(inv_min * mins[j]));
      ls = ls < 63 ? ls : 63;
      lm = lm < 63 ? lm : 63;
      if (j < 4) {
        packed[j] = ls;
        packed[j + 4] = lm;
      } else {
        packed[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
        packed[j - 4] = static_cast<uint8_t>(packed[j - 4] | ((ls >> 4) << 6));
        packed[j] = static_cast<uint8_t>(packed[j] | ((lm >> 4) << 6));
      }
    }
    store_u16(blk + L::d, float_to_half(max_scale / 63.0f));
    store_u16(blk + L::dmin, float_to_half(max_min / 63.0f));
    uint8_t sc[8], mn[8];
    kq::unpack_k4_scales(packed, sc, mn);
    for (int j = 0; j < 8; ++j) {
      const float d = load_fp16(blk + L::d) * static_cast<float>(sc[j]);
      if (d == 0.0f) continue;  // keeps the levels of the fit
      const float dm = load_fp16(blk + L::dmin) * static_cast<float>(mn[j]);
      for (int i = 0; i < 32; ++i) {
        const int l = kq::nearest_int((src[32 * j + i] + dm) / d);
        levels[32 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : (l > 15 ? 15 : l));
      }
    }
    uint8_t* q = blk + L::qs;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        q[32 * c + l] = static_cast<uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
  }
}

// Per super-block: the exact integer sums of sc * q * q8 and of m * (bsum
// pairs), then d_w d_x * isum - dmin_w d_x * msum.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    uint8_t sc[8], mn[8];
    kq::unpack_k4_scales(wb + L::scales, sc, mn);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t msum = 0;
    for (int j = 0; j < 16; ++j) msum += kq::load_i16(xb + kq::Q8K::bsums + 2 * j) * mn[j / 2];
    int32_t isum = 0;
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = wb + L::qs + 32 * c;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (q[l] & 0x0f) * q8[64 * c + l];
        hi += (q[l] >> 4) * q8[64 * c + 32 + l];
      }
      isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
    }
    const float dx = kq::load_f32(xb + kq::Q8K::d);
    sum +=
        load_fp16(wb + L::d) * dx * static_cast<float>(isum) - load_fp16(wb + L::dmin) * dx * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace ns::kernels::q4_k
