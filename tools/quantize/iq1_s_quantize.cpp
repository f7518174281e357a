// IQ1_S quantizer, ggml's quantize_row_iq1_s_impl (importance required). Per
// sub-block of 32 the values -1, 0, 1 plus a shift of +-1/8 are searched
// exactly: sorted by value, every split into three runs (two boundaries) and
// both shifts score sumqx^2 / sumq2 from prefix sums; each group of 8 is then
// snapped to the grid (the nearest neighbour when off it, with a refit of the
// scale). The super-block scale is the largest sub-block scale / 15 (stored
// times 1.125, ggml's fudge factor), each sub-block a 3-bit multiple.
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

namespace ns::kernels::iq1_s {
namespace {

constexpr int kBlock = 32;              // ggml's IQ1S_BLOCK_SIZE
constexpr float kGroupMaxEps = 1e-12f;  // ggml's GROUP_MAX_EPS_IQ1_S

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  iq::require_importance(importance, "IQ1_S");
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq1s);
  iq::for_each_super_block(src, dst, n, importance, iq::Iq1s::bytes, 2.0f,
                           [&](uint8_t* blk, const float* xbl, const float* qwb, float sigma2) {
    float scales[8];
    int shifts[8];
    float max_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock];
      iq::importance_weights(kBlock, qwb + kBlock * ib, xb, sigma2, weight);
      scales[ib] = 0;
      shifts[ib] = 1;
      float max = std::fabs(xb[0]);
      for (int i = 1; i < kBlock; ++i) max = std::max(max, std::fabs(xb[i]));
      if (max < kGroupMaxEps) continue;
      int order[kBlock];
      iq::sorted_order(xb, kBlock, order);
      float sumx[kBlock + 1], sumw[kBlock + 1];
      sumx[0] = sumw[0] = 0;
      for (int j = 0; j < kBlock; ++j) {
        const int i = order[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
      }
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_shift = 0;
      for (int i1 = 0; i1 <= kBlock; ++i1) {
        for (int i2 = i1; i2 <= kBlock; ++i2) {
          for (int shift : {1, -1}) {
            const float* v = shift == 1 ? iq::kIq1Plus : iq::kIq1Minus;
            const float sumqx =
                (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[kBlock] - sumx[i2]) * v[2];
            const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                (sumw[kBlock] - sumw[i2]) * v[2] * v[2];
            if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
              scale = sumqx / sumq2;
              best_score = scale * sumqx;
              besti1 = i1;
              besti2 = i2;
              best_shift = shift;
            }
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_shift == 0) continue;
      int8_t L[kBlock];
      for (int j = 0; j < kBlock; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
      if (scale < 0) {
        for (auto& l : L) l = static_cast<int8_t>(2 - l);
        scale = -scale;
        best_shift = -best_shift;
      }
      const float* xx = best_shift == 1 ? iq::kIq1Plus : iq::kIq1Minus;
      const float* const xg[4] = {xx, xx, xx, xx};
      int index[4];
      scale = iq::iq1_snap(s, 4, xb, weight, scale, xg, L, index);
      int h = 0;
      for (int k = 0; k < 4; ++k) {
        blk[iq::Iq1s::qs + 4 * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h |= (index[k] >> 8) << (3 * k);
      }
      store_u16(blk + iq::Iq1s::qh + 2 * ib, static_cast<uint16_t>(h));
      scales[ib] = scale;
      shifts[ib] = best_shift;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) return;
    const float d = max_scale / 15;
    store_u16(blk + iq::Iq1s::d, float_to_half(d * 1.125f));
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) {
      int l = iq::odd_level(scales[ib], id, 7);
      if (shifts[ib] == -1) l |= 8;
      store_u16(blk + iq::Iq1s::qh + 2 * ib, static_cast<uint16_t>(iq::iq1s_qh(blk, ib) | (l << 12)));
    }
  });
}

}  // namespace ns::kernels::iq1_s
