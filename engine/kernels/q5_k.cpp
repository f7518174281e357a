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
      for (int half = 0; half < 2; ++half) {
        int32_t s = 0;
        for (int l = 0; l < 32; ++l) s += level(wb, c, half, l) * q8[64 * c + 32 * half + l];
        isum += sc[2 * c + half] * s;
      }
    }
    const float dx = kq::load_f32(xb + kq::Q8K::d);
    sum +=
        load_fp16(wb + L::d) * dx * static_cast<float>(isum) - load_fp16(wb + L::dmin) * dx * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace ns::kernels::q5_k
