// IQ4_NL: blocks of 32 4-bit indices into a fixed non-linear table of 16
// int8 levels (kValues) with one fp16 scale, x = d * kValues[nibble];
// nibbles ordered as in Q4_0. Scalar reference; dotted against Q8_0.
#include <cmath>

#include "engine/kernels/block32.h"
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

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::IQ4_NL>(src, dst, n); }

// ggml's quantize_row_iq4_nl_ref (quantize_row_iq4_nl_impl with ntry = -1,
// no importance weights): the value of largest magnitude maps to level -127,
// every value takes its nearest level under that scale, and the stored scale
// is the weighted (x^2) least-squares fit of those levels.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    uint8_t L[kBlockElems] = {};
    const auto [amax, max] = kq::largest_magnitude(src, kBlockElems);
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

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::IQ4_NL>(w, x, n); }

}  // namespace ns::kernels::iq4_nl
