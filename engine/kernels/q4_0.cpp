// Q4_0: blocks of 32 4-bit values with one fp16 scale, x = d * (nibble - 8).
// Element j < 16 sits in the low nibble of byte j, element j + 16 in its high
// nibble. Scalar reference; dotted against Q8_0 activations.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_0 {
namespace {

struct Block {
  static constexpr int64_t kBlockElems = q4_0::kBlockElems;
  static constexpr size_t kBlockBytes = q4_0::kBlockBytes;
  static constexpr bool kMin = false;
  static float scale(const uint8_t* blk) { return load_fp16(blk); }
  static int level(const uint8_t* blk, int j) { return block32::nibble(blk + 2, j) - 8; }
};

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<Block>(src, dst, n); }

// ggml's quantize_row_q4_0_ref: block32::quantize_signed with half = 8.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int code[kBlockElems];
    store_u16(blk, float_to_half(block32::quantize_signed(src, 8, code)));
    block32::pack_nibbles(code, blk + 2);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<Block>(w, x, n); }

}  // namespace ns::kernels::q4_0
