// Q4_1: blocks of 32 4-bit values with an fp16 scale d and an fp16 min m,
// x = d * nibble + m; nibbles ordered as in Q4_0. Scalar reference; dotted
// against Q8_1, whose block sum s turns the min into one product per block.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q4_1 {
namespace {

struct Block {
  static constexpr int64_t kBlockElems = q4_1::kBlockElems;
  static constexpr size_t kBlockBytes = q4_1::kBlockBytes;
  static constexpr bool kMin = true;
  static float scale(const uint8_t* blk) { return load_fp16(blk); }
  static int level(const uint8_t* blk, int j) { return block32::nibble(blk + 4, j); }
};

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<Block>(src, dst, n); }

// ggml's quantize_row_q4_1_ref: block32::quantize_affine with 16 levels.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int code[kBlockElems];
    float min;
    store_u16(blk, float_to_half(block32::quantize_affine(src, 16, code, &min)));
    store_u16(blk + 2, float_to_half(min));
    block32::pack_nibbles(code, blk + 4);
  }
}

// Per block: d_w d_x sum(q_w q_x) + m_w s_x, as ggml's generic kernel.
float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<Block>(w, x, n); }

}  // namespace ns::kernels::q4_1
