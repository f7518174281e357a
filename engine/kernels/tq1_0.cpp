// TQ1_0: ternary super-blocks of 256 weights packed 5 to a byte as base-3
// digits (-1, 0, 1 stored as 0..2), one fp16 scale (1.69 bits per weight;
// BitNet-style models). Layout and digit order: iquant.h. Scalar reference,
// bit-exact with ggml's dequantize_row_tq1_0; dotted against Q8_K in ggml's
// integer order.
// The loops are iquant.h's ternary_dequantize / ternary_vec_dot /
// ternary_quantize; this file holds the unpacking and the packing.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::tq1_0 {
namespace {

struct Unpack {
  using L = iq::Tq1;
  // The 256 weights of a block (digit - 1) in element order.
  static void unpack(const uint8_t* blk, int8_t* w) {
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qs + m], n) - 1);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qs + 32 + m], n) - 1);
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qh + j], n) - 1);
  }
  // The inverse: digits (0..2, element order) into qs and qh, digit n of a
  // byte worth 3^(4 - n), stored as ceil(value * 256 / 243) (see iquant.h);
  // a qh byte holds 4 digits, so its value is scaled by 3 first.
  static void pack(const uint8_t* digits, uint8_t* blk) {
    const auto store = [](int value) { return static_cast<uint8_t>((value * 256 + 242) / 243); };
    const auto byte = [&](int first, int stride, int count) {
      int value = 0;
      for (int n = 0; n < count; ++n) value = 3 * value + digits[first + stride * n];
      for (int n = count; n < 5; ++n) value *= 3;
      return store(value);
    };
    for (int m = 0; m < 32; ++m) blk[L::qs + m] = byte(m, 32, 5);
    for (int m = 0; m < 16; ++m) blk[L::qs + 32 + m] = byte(160 + m, 16, 5);
    for (int j = 0; j < 4; ++j) blk[L::qh + j] = byte(240 + j, 4, 4);
  }
};
static_assert(Unpack::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::ternary_dequantize<Unpack>(src, dst, n); }
void quantize(const float* src, void* dst, int64_t n) { iq::ternary_quantize<Unpack>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::ternary_vec_dot<Unpack>(w, x, n); }

}  // namespace ns::kernels::tq1_0
