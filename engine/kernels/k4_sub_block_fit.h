// The part Q4_K's and Q5_K's reference quantizers share (ggml's
// quantize_row_q4_K_ref / q5_K_ref): per sub-block of 32 a (scale, min) fit
// by make_qkx2_quants weighted by rms + |x|, both quantized to 6 bits against
// their largest value and packed (kquant.h), then every value re-quantized
// with the stored pair. They differ in the level count and the search range.
// Below it, the quantizer loop and the reference dequantizer they share, given
// where a level's bits lie. (Their Q8_K dots stay apart: one written over the
// level function measured 1.2-1.5x slower for Q4_K and Q5_K.)
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/kernels/format.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::kq {

// Writes d, dmin and the packed scales of one 256-value block at `blk`
// (Q4K/Q5K offsets: they agree) and the levels 0..nmax of its values.
static inline void fit_k4_sub_blocks(const float* src, uint8_t* blk, int nmax, float rmin, int nstep,
                                     uint8_t levels[256]) {
  static_assert(Q4K::d == Q5K::d && Q4K::dmin == Q5K::dmin && Q4K::scales == Q5K::scales);
  uint8_t aux[32];
  float weights[32], scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* x = src + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[l]);
    scales[j] = make_qkx2_quants(32, nmax, x, weights, levels + 32 * j, &mins[j], aux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* packed = blk + Q4K::scales;
  for (int j = 0; j < 8; ++j) {
    auto ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    auto lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
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
  store_u16(blk + Q4K::d, float_to_half(max_scale / 63.0f));
  store_u16(blk + Q4K::dmin, float_to_half(max_min / 63.0f));
  uint8_t sc[8], mn[8];
  unpack_k4_scales(packed, sc, mn);
  for (int j = 0; j < 8; ++j) {
    const float d = load_fp16(blk + Q4K::d) * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;  // keeps the levels of the fit
    const float dm = load_fp16(blk + Q4K::dmin) * static_cast<float>(mn[j]);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((src[32 * j + i] + dm) / d);
      levels[32 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
    }
  }
}

// The quantizer: per block of 256 fit_k4_sub_blocks, then Pack(levels, blk)
// stores the levels (L: the block's offsets, Q4K or Q5K).
template <class L, void (*Pack)(const uint8_t* levels, uint8_t* blk)>
static void k4_quantize(const float* src, void* dst, int64_t n, int nmax, float rmin, int nstep) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 256; ++b, blk += L::bytes, src += 256) {
    uint8_t levels[256];
    fit_k4_sub_blocks(src, blk, nmax, rmin, nstep, levels);
    Pack(levels, blk);
  }
}

// Level(blk, c, half, l): the level of element 64 c + 32 half + l of the
// block at blk; L: the block's offsets (Q4K or Q5K).
using K4LevelFn = int (*)(const uint8_t* blk, int c, int half, int l);

// x = d * sc * q - dmin * m, sub-block by sub-block.
template <class L, K4LevelFn Level>
static void k4_dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / 256; ++b, blk += L::bytes) {
    const float d = load_fp16(blk + L::d);
    const float dmin = load_fp16(blk + L::dmin);
    uint8_t sc[8], mn[8];
    unpack_k4_scales(blk + L::scales, sc, mn);
    for (int c = 0; c < 4; ++c) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(sc[2 * c + half]);
        const float ml = dmin * static_cast<float>(mn[2 * c + half]);
        for (int l = 0; l < 32; ++l) *dst++ = dl * static_cast<float>(Level(blk, c, half, l)) - ml;
      }
    }
  }
}

}  // namespace ns::kernels::kq
