// IQ1_M quantizer, ggml's quantize_row_iq1_m_impl (importance optional: the
// weights are x^2 without it). As IQ1_S's exact search (iq1_s_quantize.cpp)
// on blocks of 16, where each group of 8 has its own shift sign: the prefix
// sums are kept per half so one pass over the two boundaries scores the four
// sign pairs. After snapping to the grid, the super-block scale is the
// least-squares fit of all 256 values against their 3-bit-scaled levels
// (stored times 1.1125, ggml's fudge factor) in the scale words' top nibbles.
// Layout: iquant.h; search and weights: iq_quant_search.h.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/iq_quantize.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq1_m {
namespace {

constexpr int kBlock = 16;             // ggml's IQ1M_BLOCK_SIZE
constexpr float kGroupMaxEps = 1e-7f;  // ggml's GROUP_MAX_EPS_IQ1_M
// Sign pair k (group 0, group 1): 0 (+, +), 1 (+, -), 2 (-, +), 3 (-, -); the
// qh bits that mark a negative shift for it.
constexpr uint8_t kShiftMask[4] = {0x00, 0x80, 0x08, 0x88};
const float* shifted_values(int k, int group) {
  return (group == 0 ? k < 2 : k % 2 == 0) ? iq::kIq1Plus : iq::kIq1Minus;
}

void block_weights(const float* qw, const float* xb, float sigma2, float* weight) {
  if (qw)
    iq::importance_weights(kBlock, qw, xb, sigma2, weight);
  else
    for (int i = 0; i < kBlock; ++i) weight[i] = xb[i] * xb[i];
}

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq1s);
  iq::for_each_super_block(src, dst, n, importance, iq::Iq1m::bytes, 2.0f,
                           [&](uint8_t* blk, const float* xbl, const float* qwb, float sigma2) {
    uint8_t* qs = blk + iq::Iq1m::qs;
    uint8_t* qh = blk + iq::Iq1m::qh;
    float scales[16];
    int shifts[16];
    float max_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock];
      block_weights(qwb ? qwb + kBlock * ib : nullptr, xb, sigma2, weight);
      scales[ib] = 0;
      shifts[ib] = 0;
      float max = std::fabs(xb[0]);
      for (int i = 1; i < kBlock; ++i) max = std::max(max, std::fabs(xb[i]));
      if (max < kGroupMaxEps) continue;
      int order[kBlock];
      iq::sorted_order(xb, kBlock, order);
      // Prefix sums per half (a half is a group: its own shift sign).
      float px[2][kBlock + 1], pw[2][kBlock + 1];
      px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
      for (int j = 0; j < kBlock; ++j) {
        const int i = order[j];
        const int h = i < kBlock / 2 ? 0 : 1;
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
      }
      const float txs[2] = {px[0][kBlock], px[1][kBlock]};
      const float tws[2] = {pw[0][kBlock], pw[1][kBlock]};
      // Levels 0, 1, 2 are one apart, so a split's sum is T * v2 - px[i1] - px[i2].
      const float p2 = iq::kIq1Plus[2], m2 = iq::kIq1Minus[2];
      const float cp1 = iq::kIq1Plus[0] * iq::kIq1Plus[0] - iq::kIq1Plus[1] * iq::kIq1Plus[1];
      const float cp2 = iq::kIq1Plus[1] * iq::kIq1Plus[1] - iq::kIq1Plus[2] * iq::kIq1Plus[2];
      const float cm1 = iq::kIq1Minus[0] * iq::kIq1Minus[0] - iq::kIq1Minus[1] * iq::kIq1Minus[1];
      const float cm2 = iq::kIq1Minus[1] * iq::kIq1Minus[1] - iq::kIq1Minus[2] * iq::kIq1Minus[2];
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_k = -1;
      for (int i1 = 0; i1 <= kBlock; ++i1) {
        for (int i2 = i1; i2 <= kBlock; ++i2) {
          float qx_p[2], qx_m[2], q2_p[2], q2_m[2];
          for (int h = 0; h < 2; ++h) {
            const float sx = px[h][i1] + px[h][i2];
            qx_p[h] = txs[h] * p2 - sx;
            qx_m[h] = txs[h] * m2 - sx;
            q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
            q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
          }
          const float sumqx[4] = {qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]};
          const float sumq2[4] = {q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]};
          for (int k = 0; k < 4; ++k) {
            if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
              scale = sumqx[k] / sumq2[k];
              best_score = scale * sumqx[k];
              besti1 = i1;
              besti2 = i2;
              best_k = k;
            }
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_k < 0) continue;
      int8_t L[kBlock];
      for (int j = 0; j < kBlock; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
      if (scale < 0) {
        for (auto& l : L) l = static_cast<int8_t>(2 - l);
        scale = -scale;
        best_k = 3 - best_k;
      }
      const float* const xg[2] = {shifted_values(best_k, 0), shifted_values(best_k, 1)};
      int index[2];
      scale = iq::iq1_snap(s, 2, xb, weight, scale, xg, L, index);
      qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
      qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
      qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
      scales[ib] = scale;
      shifts[ib] = best_k;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) return;
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = iq::odd_level(scales[ib], id, 7);
      sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      qh[ib] |= kShiftMask[shifts[ib]];
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock];
      block_weights(qwb ? qwb + kBlock * ib : nullptr, xb, sigma2, weight);
      for (int k = 0; k < 2; ++k) {
        const float* xx = shifted_values(shifts[ib], k);
        const int e = qs[2 * ib + k] | (((qh[ib] >> (4 * k)) & 7) << 8);
        for (int j = 0; j < 8; ++j) {
          const float w = weight[8 * k + j];
          const float q = xx[iq::grid_level(s, e, j)] * static_cast<float>(2 * l + 1);
          sumqx += w * q * xb[8 * k + j];
          sumq2 += w * q * q;
        }
      }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t dh = float_to_half(d * 1.1125f);
    sc[0] = static_cast<uint16_t>(sc[0] | ((dh & 0x000f) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((dh & 0x00f0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((dh & 0x0f00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (dh & 0xf000));
    for (int k = 0; k < 4; ++k) store_u16(blk + iq::Iq1m::scales + 2 * k, sc[k]);
  });
}

}  // namespace ns::kernels::iq1_m
