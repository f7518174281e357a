// IQ4_NL: blocks of 32 4-bit indices into a fixed non-linear table of 16
// int8 levels (kValues) with one fp16 scale, x = d * kValues[nibble];
// nibbles ordered as in Q4_0. Scalar reference; dotted against Q8_0.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq4_nl {
namespace {

// ggml's best_index_int8 over the sorted levels: x picks level i once it
// reaches the midpoint of levels i - 1 and i (ties go up). Doubling x keeps
// the comparison exact.
int best_index(float x) {
  const float x2 = x + x;
  int idx = 0;
  for (int step = 8; step > 0; step >>= 1) {
    const int j = idx + step;
    if (x2 >= static_cast<float>(kValues[j - 1] + kValues[j])) idx = j;
  }
  return idx;
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk);
    const uint8_t* qs = blk + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kValues[qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kValues[qs[j] >> 4]);
    }
  }
}

// ggml's quantize_row_iq4_nl_ref (quantize_row_iq4_nl_impl with ntry = -1,
// no importance weights): the value of largest magnitude maps to level -127,
// every value takes its nearest level under that scale, and the stored scale
// is the weighted (x^2) least-squares fit of those levels.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    uint8_t L[kBlockElems] = {};
    float amax = 0, max = 0;
    for (int j = 0; j < kBlockElems; ++j) {
      const float ax = std::fabs(src[j]);
      if (ax > amax) {
        amax = ax;
        max = src[j];
      }
    }
    float d = 0;
    if (amax >= kq::kGroupMaxEps) {
      const float id = 1 / (max / static_cast<float>(kValues[0]));
      float sumqx = 0, sumq2 = 0;
      for (int j = 0; j < kBlockElems; ++j) {
        const int l = best_index(id * src[j]);
        L[j] = static_cast<uint8_t>(l);
        const float q = kValues[l];
        const float w = src[j] * src[j];
        sumqx += w * q * src[j];
        sumq2 += w * q * q;
      }
      d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    }
    store_u16(blk, float_to_half(d));
    for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

// Exact integer sum per block, scaled by d_x * d_w (ggml's order).
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_0::kBlockBytes) {
    const uint8_t* qs = wb + 2;
    const auto* xq = reinterpret_cast<const int8_t*>(xb + 2);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += kValues[qs[j] & 0x0f] * xq[j] + kValues[qs[j] >> 4] * xq[j + 16];
    sum += load_fp16(xb) * load_fp16(wb) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace ns::kernels::iq4_nl
