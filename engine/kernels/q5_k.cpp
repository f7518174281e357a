// Q5_K: super-blocks of 256 5-bit values in 8 sub-blocks of 32, each with a
// 6-bit scale and a 6-bit min, and fp16 super-scales d and dmin:
// x = d * sc * q - dmin * m. Low 4 bits packed as Q4_K's, the fifth in qh.
// Layout: kquant.h. Scalar reference; dotted against Q8_K.
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/k4_sub_block_fit.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q5_k {

using L = kq::Q5K;
static_assert(L::bytes == kBlockBytes);

namespace {

// Element 64 c + 32 half + l's level in [0, 31].
int level(const uint8_t* blk, int c, int half, int l) {
  const uint8_t ql = blk[L::qs + 32 * c + l];
  const int low = half == 0 ? (ql & 0x0f) : (ql >> 4);
  return low | (((blk[L::qh + l] >> (2 * c + half)) & 1) << 4);
}

void pack(const uint8_t* levels, uint8_t* blk) {
  uint8_t* qh = blk + L::qh;
  uint8_t* ql = blk + L::qs;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = levels[64 * c + l], hi = levels[64 * c + 32 + l];
      qh[l] = static_cast<uint8_t>(qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      ql[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
    }
  }
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { kq::k4_dequantize<L, level>(src, dst, n); }

// ggml's quantize_row_q5_K_ref: as Q4_K's with 31 levels and a narrower
// scale search (rmin -0.5, 15 steps).
void quantize(const float* src, void* dst, int64_t n) { kq::k4_quantize<L, pack>(src, dst, n, 31, -0.5f, 15); }

// As Q4_K's: exact integer sums per super-block, then two products.
float vec_dot(const void* w, const void* x, int64_t n) { return kq::k4_vec_dot<L, level>(w, x, n); }

}  // namespace ns::kernels::q5_k
