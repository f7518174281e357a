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
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/iq_quantize.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq2_xs {
namespace {

constexpr int kMaxQ = 3;
// 19 scales around max / 5; only the groups the best left off the grid are snapped again.
constexpr iq::ScaleSearch kSearch{16, 8, kMaxQ, 9, 0.1f, true, kq::kGroupMaxEps, false, iq::odd_levels, iq::snap_odd};

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  iq::require_importance(importance, "IQ2_XS");
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq2xs);
  iq::for_each_super_block(src, dst, n, importance, iq::Iq2xs::bytes, 1.0f,
                           [&](uint8_t* blk, const float* xbl, const float* qwb, float sigma2) {
    uint16_t q2[32] = {};
    float scales[16];
    const float max_scale = iq::fit_sub_blocks(s, kSearch, xbl, qwb, sigma2, "IQ2_XS", scales,
                                               [&](int ib, const int* e, const uint8_t* signs) {
      for (int k = 0; k < 2; ++k) q2[2 * ib + k] = static_cast<uint16_t>(e[k] | (signs[k] << 9));
    });
    if (max_scale == 0) return;
    const float d = max_scale / 31;
    store_u16(blk + iq::Iq2xs::d, float_to_half(d));
    const float id = 1 / d;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = iq::odd_level(scales[ib], id, 15);
      blk[iq::Iq2xs::scales + ib / 2] |= static_cast<uint8_t>(l << (4 * (ib % 2)));
    }
    std::memcpy(blk + iq::Iq2xs::qs, q2, sizeof q2);
  });
}

}  // namespace ns::kernels::iq2_xs
