// IQ2_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 magnitudes from a 10-bit index into a 1024-entry grid, 8 explicit sign
// bits per group and two 4-bit scales per sub-block (one per 16 weights);
// one fp16 super-scale (2.56 bits per weight). Layout: iquant.h. Scalar
// reference, bit-exact with ggml's dequantize_row_iq2_s; dotted against Q8_K
// in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's signed_grid_dequantize / signed_grid_vec_dot;
// this file holds the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq2_s {
namespace {

// Scales: iq::Iq2HalfScales; a 10-bit grid index and 8 explicit sign bits
// per group.
struct Grid : iq::Iq2HalfScales<iq::Iq2s> {
  static uint64_t magnitudes(const uint8_t* blk, int v, int l) { return iq::kIq2sGrid[iq::iq2s_index(blk, v, l)]; }
  static uint8_t signs(const uint8_t* blk, int v, int l) { return iq::iq2s_signs(blk, v, l); }
};
static_assert(Grid::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::signed_grid_dequantize<Grid>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::signed_grid_vec_dot<Grid>(w, x, n); }

}  // namespace ns::kernels::iq2_s
