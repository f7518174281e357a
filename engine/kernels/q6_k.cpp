// Q6_K: super-blocks of 256 6-bit values in 16 sub-blocks of 16, each with
// an int8 scale, and an fp16 super-scale: x = d * sc * (q - 32). Low 4 bits
// in ql, high 2 in qh. Layout: kquant.h. Scalar reference; dotted against Q8_K.
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q6_k {

using L = kq::Q6K;
static_assert(L::bytes == kBlockBytes);

namespace {

// Element 128 h + 32 k + l's level in [-32, 31].
int level(const uint8_t* blk, int h, int k, int l) {
  const uint8_t ql = blk[L::ql + 64 * h + 32 * (k % 2) + l];
  const int low = k < 2 ? (ql & 0x0f) : (ql >> 4);
  const int high = (blk[L::qh + 32 * h + l] >> (2 * k)) & 3;
  return (low | (high << 4)) - 32;
}

void unpack_scales(const uint8_t* blk, int8_t sc[16]) { std::memcpy(sc, blk + L::scales, 16); }

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + L::scales);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          *dst++ = d * static_cast<float>(sc[8 * h + 2 * k + l / 16]) * static_cast<float>(level(blk, h, k, l));
        }
      }
    }
  }
}

// ggml's quantize_row_q6_K_ref: per sub-block a scale from make_qx_quants
// (levels in [-32, 31], weighted by x^2), the scales quantized to int8
// against the one of largest magnitude (which maps to -128), then every
// value re-quantized with its stored scale. An all-zero block is all zeros.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int8_t levels[kBlockElems];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = kq::make_qx_quants(16, 32, src + 16 * j, levels + 16 * j);
    const auto [max_abs_scale, max_scale] = kq::largest_magnitude(scales, 16);
    if (max_abs_scale < kq::kGroupMaxEps) {
      std::memset(blk, 0, kBlockBytes);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    store_u16(blk + L::d, float_to_half(1 / iscale));
    auto* sc = reinterpret_cast<int8_t*>(blk + L::scales);
    for (int j = 0; j < 16; ++j) {
      const int l = kq::nearest_int(iscale * scales[j]);
      sc[j] = static_cast<int8_t>(l < 127 ? l : 127);
    }
    kq::requantize_sub_blocks16(src, load_fp16(blk + L::d), sc, 32, levels);
    uint8_t* ql = blk + L::ql;
    uint8_t* qh = blk + L::qh;
    for (int h = 0; h < 2; ++h) {
      const auto* lv = reinterpret_cast<const uint8_t*>(levels + 128 * h);
      for (int l = 0; l < 32; ++l) {
        ql[64 * h + l] = static_cast<uint8_t>((lv[l] & 0x0f) | ((lv[l + 64] & 0x0f) << 4));
        ql[64 * h + l + 32] = static_cast<uint8_t>((lv[l + 32] & 0x0f) | ((lv[l + 96] & 0x0f) << 4));
        qh[32 * h + l] = static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) | ((lv[l + 64] >> 4) << 4) |
                                              ((lv[l + 96] >> 4) << 6));
      }
    }
  }
}

// Per super-block: the exact integer sum of sc * (q - 32) * q8, then d_w d_x * isum.
float vec_dot(const void* w, const void* x, int64_t n) { return kq::k16_vec_dot<L, level, unpack_scales>(w, x, n); }

}  // namespace ns::kernels::q6_k
