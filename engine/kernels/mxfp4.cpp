// MXFP4: blocks of 32 E2M1 codes with one E8M0 exponent byte, nibbles ordered
// as in Q4_0; x = mxfp4::scale(e) * kValues[nibble] (both halves of ggml's
// doubled-value convention, see formats.h). Scalar reference; dotted against
// Q8_0 as in ggml, whose generic vec_dot this follows.
#include <cmath>

#include "engine/kernels/block32.h"

namespace ns::kernels::mxfp4 {
// A tie goes to the smaller magnitude and 0 is code 0, never code 8 (-0).
// The errors are computed in float, as there, so the choice is the same bit for bit.
int best_index(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kValues[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kValues[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

namespace {

// ggml's exponent, floor(log2(amax)) - 2 + 127, through the same log2f: amax
// lands in [8, 16) half-units, so the top level 12 covers 1.5 * 2^floor(log2
// amax) and larger values take it. log2f rounds some amax just below a power
// of two up to it (16 - 2^-20 gives 4.0): those blocks get the next exponent,
// as in ggml's files. An all-zero block gets e = 0. Where ggml's
// float-to-uint8 cast is undefined (amax < 2^-125, inf, NaN) the exponent is
// clamped to 0 or 252 (the largest a finite amax gives).
uint8_t exponent(float amax) {
  if (!(amax > 0)) return 0;
  const float l = std::floor(std::log2(amax));
  if (!(l >= -125)) return 0;
  return l > 127 ? uint8_t{252} : static_cast<uint8_t>(static_cast<int>(l) - 2 + 127);
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { block32::dequantize<block32::MXFP4>(src, dst, n); }

// ggml's quantize_row_mxfp4_ref: one exponent from the largest magnitude,
// then each value's nearest level under it (no scale search, no weights).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    const uint8_t e = exponent(kq::abs_max(src, kBlockElems));
    const float d = scale(e);
    blk[0] = e;
    for (int j = 0; j < 16; ++j)
      blk[1 + j] = static_cast<uint8_t>(best_index(src[j], d) | (best_index(src[j + 16], d) << 4));
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return block32::vec_dot<block32::MXFP4>(w, x, n); }

}  // namespace ns::kernels::mxfp4
