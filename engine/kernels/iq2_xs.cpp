// IQ2_XS: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups
// of 8 magnitudes from a 9-bit index into a 512-entry grid with 7 sign bits
// in the same 16-bit field, and two 4-bit scales per sub-block (one per 16
// weights); one fp16 super-scale (2.31 bits per weight). Layout: iquant.h.
// Scalar reference, bit-exact with ggml's dequantize_row_iq2_xs; dotted
// against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's signed_grid_dequantize / signed_grid_vec_dot;
// this file holds the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq2_xs {
namespace {

// Scales: iq::Iq2HalfScales. Group l's 16-bit field: low 9 bits the grid
// index, top 7 the sign bits.
struct Grid : iq::Iq2HalfScales<iq::Iq2xs> {
  static uint64_t magnitudes(const uint8_t* blk, int v, int l) {
    return iq::kIq2xsGrid[iq::iq2xs_field(blk, v, l) & 511];
  }
  static uint8_t signs(const uint8_t* blk, int v, int l) { return iq::kSigns[iq::iq2xs_field(blk, v, l) >> 9]; }
};
static_assert(Grid::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::signed_grid_dequantize<Grid>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::signed_grid_vec_dot<Grid>(w, x, n); }

}  // namespace ns::kernels::iq2_xs
