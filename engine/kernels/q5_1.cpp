// Q5_1: blocks of 32 5-bit values with an fp16 scale d and an fp16 min m,
// x = d * q + m; bits laid out as in Q5_0. Scalar reference; dotted against
// Q8_1, whose block sum s turns the min into one product per block.
#include "engine/kernels/block32.h"
#include "engine/kernels/half.h"

namespace ns::kernels::q5_1 {
namespace {

struct Block {
  static constexpr int64_t kBlockElems = q5_1::kBlockElems;
  static constexpr size_t kBlockBytes = q5_1::kBlockBytes;
  static constexpr bool kMin = true;
  static float scale(const uint8_t* blk) { return load_fp16(blk); }
  static int level(const uint8_t* blk, int j) { return block32::code5(blk + 4, blk + 8, j); }
};

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<Block>(src, dst, n); }

// ggml's quantize_row_q5_1_ref: block32::quantize_affine with 32 levels.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    int code[kBlockElems];
    float min;
    store_u16(blk, float_to_half(block32::quantize_affine(src, 32, code, &min)));
    store_u16(blk + 2, float_to_half(min));
    block32::pack_5bit(code, blk + 4, blk + 8);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<Block>(w, x, n); }

}  // namespace ns::kernels::q5_1
