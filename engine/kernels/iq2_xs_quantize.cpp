// IQ2_XS quantizer, ggml's quantize_row_iq2_xs_impl (importance required). As
// IQ2_XXS's search (iq2_xxs_quantize.cpp) on blocks of 16 (a 4-bit scale
// each) over the 512-entry grid: signs folded per group of 8, 19 scales
// around max / 5 tried with every group snapped to the grid, and only the
// groups the best fit left off the grid snapped again under its scale before
// the refit. Each group stores a 9-bit entry and 7 sign bits in 16 bits.
// Layout: iquant.h; search and weights: iq_quant_search.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/iq_quant_search.h"
#include "engine/kernels/iq_quantize.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq2_xs {

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  iq::require_importance(importance, "IQ2_XS");
  constexpr int kMaxQ = 3;
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq2xs);
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / iq::kElems; ++b, blk += iq::Iq2xs::bytes) {
    std::memset(blk, 0, iq::Iq2xs::bytes);
    const float* xbl = src + iq::kElems * b;
    const float* qwb = importance + iq::kElems * b;
    uint16_t q2[32] = {};
    float scales[16];
    float max_scale = 0;
    const float sigma2 = iq::sum_squares(xbl, iq::kElems) / static_cast<float>(iq::kElems);
    for (int ib = 0; ib < 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16], waux[16], xval[16];
      int8_t L[16] = {}, Laux[16];
      uint8_t signs[2];
      const float max = iq::fold_block(16, xb, qwb + 16 * ib, sigma2, weight, waux, xval, signs);
      scales[ib] = 0;
      if (max < kq::kGroupMaxEps) continue;
      float best = 0;
      float scale = max / static_cast<float>(2 * kMaxQ - 1);
      bool on_grid[2] = {true, true};
      for (int is = -9; is <= 9; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / max;
        const float this_scale = 1 / id;
        bool on_grid_aux[2];
        for (int k = 0; k < 2; ++k) {
          iq::odd_levels(xval + 8 * k, id, Laux + 8 * k);
          on_grid_aux[k] = s.on_grid(iq::grid_key(Laux + 8 * k)) >= 0;
          iq::snap_odd(s, Laux + 8 * k, xval + 8 * k, waux + 8 * k, this_scale);
        }
        if (iq::take_better_fit(16, xval, weight, Laux, scale, best, L)) {
          on_grid[0] = on_grid_aux[0];
          on_grid[1] = on_grid_aux[1];
        }
      }
      if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; ++k) {
          if (on_grid[k]) continue;
          iq::odd_levels(xval + 8 * k, id, L + 8 * k);
          iq::snap_odd(s, L + 8 * k, xval + 8 * k, waux + 8 * k, scale);
        }
        iq::refit_scale(16, xval, weight, L, scale);
      }
      iq::unsign_scale(scale, signs, 2);
      for (int k = 0; k < 2; ++k) {
        const int e = iq::final_entry(s, L + 8 * k, "IQ2_XS");
        q2[2 * ib + k] = static_cast<uint16_t>(e | (signs[k] << 9));
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    store_u16(blk + iq::Iq2xs::d, float_to_half(d));
    const float id = 1 / d;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = iq::odd_level(scales[ib], id, 15);
      blk[iq::Iq2xs::scales + ib / 2] |= static_cast<uint8_t>(l << (4 * (ib % 2)));
    }
    std::memcpy(blk + iq::Iq2xs::qs, q2, sizeof q2);
  }
}

}  // namespace ns::kernels::iq2_xs
