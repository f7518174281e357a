// Q3_K: super-blocks of 256 3-bit values in [-4, 3] in 16 sub-blocks of 16,
// each with a signed 6-bit scale, and an fp16 super-scale: x = d * sc * q.
// The low 2 bits are packed as Q2_K's, the third (set: +0, clear: -4) in
// hmask. Layout: kquant.h. Scalar reference; dotted against Q8_K.
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q3_k {

using L = kq::Q3K;
static_assert(L::bytes == kBlockBytes);

namespace {

// Element 128 h + 32 k + l's level in [-4, 3].
int level(const uint8_t* blk, int h, int k, int l) {
  const int low = (blk[L::qs + 32 * h + l] >> (2 * k)) & 3;
  const bool high = (blk[L::hmask + l] >> (4 * h + k)) & 1;
  return low - (high ? 0 : 4);
}

void unpack_scales(const uint8_t* blk, int8_t sc[16]) { kq::unpack_q3k_scales(blk + L::scales, sc); }

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    const float d = load_fp16(blk + L::d);
    int8_t sc[16];
    kq::unpack_q3k_scales(blk + L::scales, sc);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(sc[8 * h + 2 * k + half]);
          for (int l = 16 * half; l < 16 * half + 16; ++l) *dst++ = dl * static_cast<float>(level(blk, h, k, l));
        }
      }
    }
  }
}

// ggml's quantize_row_q3_K_ref: per sub-block a scale from make_q3_quants
// (levels in [-4, 3], refined by weighted least squares), the scales
// quantized to 6 bits against the one of largest magnitude (which maps to
// -32), then every value re-quantized with its stored scale.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int8_t levels[kBlockElems];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = kq::make_q3_quants(16, 4, src + 16 * j, levels + 16 * j);
    const float max_scale = kq::largest_magnitude(scales, 16).max;
    uint8_t* packed = blk + L::scales;
    std::memset(packed, 0, 12);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = static_cast<int8_t>(kq::nearest_int(iscale * scales[j]));
        l = (l < -32 ? -32 : (l > 31 ? 31 : l)) + 32;
        if (j < 8) {
          packed[j] = static_cast<uint8_t>(l & 0x0f);
        } else {
          packed[j - 8] = static_cast<uint8_t>(packed[j - 8] | ((l & 0x0f) << 4));
        }
        packed[8 + j % 4] = static_cast<uint8_t>(packed[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
      }
      store_u16(blk + L::d, float_to_half(1 / iscale));
    } else {
      store_u16(blk + L::d, float_to_half(0.0f));
    }
    int8_t sc[16];
    kq::unpack_q3k_scales(packed, sc);
    kq::requantize_sub_blocks16(src, load_fp16(blk + L::d), sc, 4, levels);
    // Third bit of element e: bit e / 32 of hmask[e % 32]; the low 2 bits stay.
    uint8_t* hmask = blk + L::hmask;
    std::memset(hmask, 0, 32);
    for (int e = 0; e < kBlockElems; ++e) {
      if (levels[e] > 3) {
        hmask[e % 32] = static_cast<uint8_t>(hmask[e % 32] | (1 << (e / 32)));
        levels[e] = static_cast<int8_t>(levels[e] - 4);
      }
    }
    kq::pack_2bit_planes(levels, blk + L::qs);
  }
}

// Per super-block: the exact integer sum of sc * q * q8, then d_w d_x * isum.
float vec_dot(const void* w, const void* x, int64_t n) { return kq::k16_vec_dot<L, level, unpack_scales>(w, x, n); }

}  // namespace ns::kernels::q3_k
