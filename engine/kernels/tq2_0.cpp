// TQ2_0: ternary super-blocks of 256 weights, 2 bits each (values 0..2 for
// -1, 0, 1), one fp16 scale (2.06 bits per weight; BitNet-style models).
// Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_tq2_0; dotted against Q8_K in ggml's integer order.
// The loops are iquant.h's ternary_dequantize / ternary_vec_dot /
// ternary_quantize; this file holds the unpacking and the packing.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::tq2_0 {
namespace {

struct Unpack {
  using L = iq::Tq2;
  // The 256 weights of a block (q - 1) in element order: 128h + 32l + m is
  // bits 2l..2l+1 of qs[32h + m].
  static void unpack(const uint8_t* blk, int8_t* w) {
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *w++ = static_cast<int8_t>(((blk[L::qs + 32 * h + m] >> (2 * l)) & 3) - 1);
  }
  // The inverse: digit 0..2 of element 128h + 32l + m into bits 2l..2l+1 of qs[32h + m].
  static void pack(const uint8_t* digits, uint8_t* blk) {
    for (int h = 0; h < 2; ++h)
      for (int m = 0; m < 32; ++m) {
        int q = 0;
        for (int l = 0; l < 4; ++l) q |= digits[128 * h + 32 * l + m] << (2 * l);
        blk[L::qs + 32 * h + m] = static_cast<uint8_t>(q);
      }
  }
};
static_assert(Unpack::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::ternary_dequantize<Unpack>(src, dst, n); }
void quantize(const float* src, void* dst, int64_t n) { iq::ternary_quantize<Unpack>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::ternary_vec_dot<Unpack>(w, x, n); }

}  // namespace ns::kernels::tq2_0
