// Q8_K: super-blocks of 256 int8 with a float scale and the int16 sums of
// each 16 quants (bsums), x = d * q. Only ever holds activations: the
// K-quants are dotted against it, and bsums turn their mins (and offsets)
// into 16 products per super-block. Scalar reference, bit-exact with ggml's
// quantize_row_q8_K_ref, which is also what ggml's x86 build uses.
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::q8_k {

using L = kq::Q8K;
static_assert(L::bytes == kBlockBytes);

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = kq::load_f32(blk + L::d);
    const auto* q = reinterpret_cast<const int8_t*>(blk + L::qs);
    for (int j = 0; j < kBlockElems; ++j) dst[j] = d * static_cast<float>(q[j]);
  }
}

// The value of largest magnitude (the first, with its sign) maps to -127:
// q = min(127, nearest_int(-127 / max * x)) rounds ties to even, d = max / -127.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, src += kBlockElems) {
    const auto [amax, max] = kq::largest_magnitude(src, kBlockElems);
    auto* q = reinterpret_cast<int8_t*>(blk + L::qs);
    if (amax == 0.0f) {
      std::memset(blk, 0, kBlockBytes);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kBlockElems; ++j) {
      const int v = kq::nearest_int(iscale * src[j]);
      q[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kBlockElems / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[16 * g + j];
      const auto s16 = static_cast<int16_t>(sum);
      std::memcpy(blk + L::bsums + 2 * g, &s16, sizeof s16);
    }
    const float d = 1 / iscale;
    std::memcpy(blk + L::d, &d, sizeof d);
  }
}

}  // namespace ns::kernels::q8_k
