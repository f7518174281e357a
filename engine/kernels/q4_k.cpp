// Q4_K: super-blocks of 256 4-bit values in 8 sub-blocks of 32, each with a
// 6-bit scale and a 6-bit min, and fp16 super-scales d and dmin:
// x = d * sc * q - dmin * m. Layout: kquant.h. Scalar reference; dotted
// against Q8_K, whose bsums give the min term as 8 products.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/k4_sub_block_fit.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q4_k {

using L = kq::Q4K;
static_assert(L::bytes == kBlockBytes);

namespace {

// Element 64 c + 32 half + l's level in [0, 15]: the low nibbles of 32 bytes,
// then their high ones.
int level(const uint8_t* blk, int c, int half, int l) { return (blk[L::qs + 32 * c + l] >> (4 * half)) & 0x0f; }

void pack(const uint8_t* levels, uint8_t* blk) {
  uint8_t* q = blk + L::qs;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      q[32 * c + l] = static_cast<uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { kq::k4_dequantize<L, level>(src, dst, n); }

// ggml's quantize_row_q4_K_ref: per sub-block a (scale, min) fit by
// make_qkx2_quants weighted by rms + |x|, both quantized to 6 bits against
// their largest value, then every value re-quantized with the stored pair.
void quantize(const float* src, void* dst, int64_t n) { kq::k4_quantize<L, pack>(src, dst, n, 15, -1.0f, 20); }

float vec_dot(const void* w, const void* x, int64_t n) { return kq::k4_vec_dot<L, level>(w, x, n); }

}  // namespace ns::kernels::q4_k
