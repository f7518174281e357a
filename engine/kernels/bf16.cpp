// BF16 weights: scalar reference. Activations are rounded to BF16 (as ggml
// does), so a product of two bf16 values is exact in float.
#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::bf16 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(load_u16(h + 2 * i));
}

void quantize(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_u16(h + 2 * i, float_to_bf16_bits(src[i]));
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const uint8_t*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(bf16_bits_to_float(load_u16(a + 2 * i)) * bf16_bits_to_float(load_u16(b + 2 * i)));
  return static_cast<float>(sum);
}

}  // namespace ns::kernels::bf16
