// IQ3_XXS quantizer, ggml's quantize_row_iq3_xxs_impl with its 256-entry grid
// (importance optional: the weights are x^2 without it). As IQ2_XS's search
// (iq2_xs_quantize.cpp) on sub-blocks of 32 with magnitudes 2l + 1, l in 0..7,
// in groups of 4 on the grid: 31 scales around max / 15 tried, the groups the
// best fit left off the grid snapped again under its scale, then the refit.
// The super-block scale is the largest sub-block scale / 31 (stored times
// 1.0125, ggml's fudge factor), each sub-block a 4-bit multiple beside its 28
// sign bits. Layout: iquant.h; search and weights: iq_quant_search.h.
#include <algorithm>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/iq_quantize.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq3_xxs {
namespace {

constexpr int kMaxQ = 8;
constexpr float kGroupMaxEps = 1e-8f;  // ggml's GROUP_MAX_EPS_IQ3_XXS
constexpr float kOdd[kMaxQ] = {1, 3, 5, 7, 9, 11, 13, 15};

// The nearest 2l + 1 to id * xval for a group of 4, l clamped to 0..7.
void levels(const float* xval, float id, int8_t* L) {
  for (int j = 0; j < 4; ++j)
    L[j] = static_cast<int8_t>(std::clamp(kq::nearest_int(0.5f * (id * xval[j] - 1)), 0, kMaxQ - 1));
}

// The grid entry of a group's levels L, snapped to the nearest listed neighbour when off the grid.
int snap(const iq::GridSearch& s, int8_t* L, const float* xval, const float* waux, float scale) {
  const uint16_t u = iq::grid_key(s, L);
  const int e = s.on_grid(u);
  return e >= 0 ? e : iq::best_neighbour(s, u, xval, waux, scale, kOdd, L);
}

// 31 scales around max / 15; only the groups the best left off the grid are snapped again.
constexpr iq::ScaleSearch kSearch{32, 4, kMaxQ, 15, 0.2f, true, kGroupMaxEps, false, levels, snap};

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq3xxs);
  iq::for_each_super_block(src, dst, n, importance, iq::Iq3xxs::bytes, 2.0f,
                           [&](uint8_t* blk, const float* xbl, const float* qwb, float sigma2) {
    uint32_t sas[8] = {};
    float scales[8];
    const float max_scale = iq::fit_sub_blocks(s, kSearch, xbl, qwb, sigma2, "IQ3_XXS", scales,
                                               [&](int ib, const int* e, const uint8_t* signs) {
      for (int k = 0; k < 8; ++k) blk[iq::Iq3xxs::qs + 8 * ib + k] = static_cast<uint8_t>(e[k]);
      sas[ib] = signs[0] | (signs[1] << 7) | (signs[2] << 14) | (static_cast<uint32_t>(signs[3]) << 21);
    });
    if (max_scale == 0) {
      std::memset(blk, 0, iq::Iq3xxs::bytes);
      return;
    }
    const float d = iq::odd_scale_codes(max_scale, scales, sas, 1);
    store_u16(blk + iq::Iq3xxs::d, float_to_half(d * 1.0125f));
    std::memcpy(blk + iq::Iq3xxs::sas, sas, sizeof sas);
  });
}

}  // namespace ns::kernels::iq3_xxs
