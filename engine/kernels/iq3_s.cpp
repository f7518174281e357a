// IQ3_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 8 groups of
// 4 magnitudes from a 9-bit index into a 512-entry grid, 8 explicit sign
// bits per 8 weights and a 4-bit scale per sub-block; one fp16 super-scale
// (3.44 bits per weight). Layout: iquant.h. Scalar reference, bit-exact with
// ggml's dequantize_row_iq3_s; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's signed_grid_dequantize / signed_grid_vec_dot;
// this file holds the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq3_s {
namespace {

// One scale 2s + 1 per sub-block (both halves): x = d * (2s + 1) * grid *
// sign, and the dot has no final factor.
struct Grid {
  using L = iq::Iq3s;
  static constexpr float kFactor = 1.0f;
  static float dl(float d, const uint8_t* blk, int v, int) { return d * static_cast<float>(iq::iq3s_scale(blk, v)); }
  static int32_t ls(const uint8_t* blk, int v, int) { return iq::iq3s_scale(blk, v); }
  static uint64_t magnitudes(const uint8_t* blk, int v, int l) {
    return iq::grid_pair(iq::kIq3sGrid[iq::iq3s_index(blk, v, 2 * l)],
                         iq::kIq3sGrid[iq::iq3s_index(blk, v, 2 * l + 1)]);
  }
  static uint8_t signs(const uint8_t* blk, int v, int l) { return iq::iq3s_signs(blk, v, l); }
};
static_assert(Grid::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::signed_grid_dequantize<Grid>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::signed_grid_vec_dot<Grid>(w, x, n); }

}  // namespace ns::kernels::iq3_s
