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

// Per super-block: the exact integer sums of sc * q * q8 and of m * (bsum
// pairs), then d_w d_x * isum - dmin_w d_x * msum.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    uint8_t sc[8], mn[8];
    kq::unpack_k4_scales(wb + L::scales, sc, mn);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t msum = 0;
    for (int j = 0; j < 16; ++j) msum += kq::load_i16(xb + kq::Q8K::bsums + 2 * j) * mn[j / 2];
    int32_t isum = 0;
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = wb + L::qs + 32 * c;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (q[l] & 0x0f) * q8[64 * c + l];
        hi += (q[l] >> 4) * q8[64 * c + 32 + l];
      }
      isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
    }
    const float dx = kq::load_f32(xb + kq::Q8K::d);
    sum +=
        load_fp16(wb + L::d) * dx * static_cast<float>(isum) - load_fp16(wb + L::dmin) * dx * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace ns::kernels::q4_k
