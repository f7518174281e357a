// IQ3_XXS: super-blocks of 256 weights in 8 sub-blocks of 32, each 8 groups
// of 4 magnitudes from an 8-bit index into a 256-entry grid, 7 sign bits per
// 8 weights and a 4-bit sub-block scale; one fp16 super-scale (3.06 bits per
// weight). Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_iq3_xxs; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's signed_grid_dequantize / signed_grid_vec_dot;
// this file holds the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq3_xxs {
namespace {

// Scales and signs: iquant.h's XxsScales (x = d * (0.5 + s) * 0.5 * grid * sign, the dot 1/4).
struct Grid : iq::XxsScales<iq::Iq3xxs, iq::iq3xxs_signs_scale, 0.5f, 0.25f> {
  static uint64_t magnitudes(const uint8_t* blk, int v, int l) {
    return iq::grid_pair(iq::kIq3xxsGrid[iq::iq3xxs_index(blk, v, 2 * l)],
                         iq::kIq3xxsGrid[iq::iq3xxs_index(blk, v, 2 * l + 1)]);
  }
};
static_assert(Grid::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::signed_grid_dequantize<Grid>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::signed_grid_vec_dot<Grid>(w, x, n); }

}  // namespace ns::kernels::iq3_xxs
