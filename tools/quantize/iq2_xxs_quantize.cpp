// IQ2_XXS quantizer, ggml's quantize_row_iq2_xxs_impl (importance required).
// Per sub-block of 32: fold the signs into the values (an odd number of minus
// signs in a group of 8 flips the least important element, as the format
// stores only 7 sign bits), fit levels 0..2 (x ~ scale * (2l + 1)) with
// make_qp_quants, try 13 scales around it snapping every group of 8 to the
// grid (the nearest neighbour under the weights when off the grid), keep the
// best least-squares fit, snap once more with it and refit the scale. The
// super-block scale is the largest sub-block scale / 31, each sub-block
// keeps a 4-bit multiple. Layout: iquant.h; search and weights:
// iq_quant_search.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/iq_quantize.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq2_xxs {
namespace {

constexpr int kMaxQ = 3;
// 13 scales around the make_qp_quants fit, every group snapped again after.
constexpr iq::ScaleSearch kSearch{32, 8, kMaxQ, 6, 0.1f, false, kq::kGroupMaxEps, true, iq::odd_levels, iq::snap_odd};

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  iq::require_importance(importance, "IQ2_XXS");
  const iq::GridSearch& s = iq::grid_search(iq::SearchGrid::iq2xxs);
  iq::for_each_super_block(src, dst, n, importance, iq::Iq2xxs::bytes, 1.0f,
                           [&](uint8_t* blk, const float* xbl, const float* qwb, float sigma2) {
    uint32_t q2[16] = {};
    float scales[8];
    const float max_scale = iq::fit_sub_blocks(s, kSearch, xbl, qwb, sigma2, "IQ2_XXS", scales,
                                               [&](int ib, const int* e, const uint8_t* signs) {
      for (int k = 0; k < 4; ++k) {
        q2[2 * ib] |= static_cast<uint32_t>(e[k]) << (8 * k);
        q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
      }
    });
    if (max_scale == 0) return;
    store_u16(blk + iq::Iq2xxs::d, float_to_half(iq::odd_scale_codes(max_scale, scales, q2 + 1, 2)));
    std::memcpy(blk + iq::Iq2xxs::qs, q2, sizeof q2);
  });
}

}  // namespace ns::kernels::iq2_xxs
