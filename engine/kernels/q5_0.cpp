// Q5_0: blocks of 32 5-bit values with an fp16 scale, x = d * (q - 16). The
// low 4 bits are nibbles ordered as in Q4_0; bit j of the little-endian
// uint32 qh is element j's fifth bit. Scalar reference; dotted against Q8_0.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_0 {
namespace {

struct Block {
  static constexpr int64_t kBlockElems = q5_0::kBlockElems;
  static constexpr size_t kBlockBytes = q5_0::kBlockBytes;
  static constexpr bool kMin = false;
  static float scale(const uint8_t* blk) { return load_fp16(blk); }
  static int level(const uint8_t* blk, int j) { return block32::code5(blk + 2, blk + 6, j) - 16; }
};

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<Block>(src, dst, n); }

// ggml's quantize_row_q5_0_ref: block32::quantize_signed with half = 16.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int code[kBlockElems];
    store_u16(blk, float_to_half(block32::quantize_signed(src, 16, code)));
    block32::pack_5bit(code, blk + 2, blk + 6);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<Block>(w, x, n); }

}  // namespace ns::kernels::q5_0
