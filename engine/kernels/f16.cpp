// F16 weights: scalar reference. Activations are rounded to F16 too (as ggml
// does), so a product of two halves is exact in float.
#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::f16 {

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = load_fp16(h + 2 * i);
}

void quantize(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_u16(h + 2 * i, float_to_half(src[i]));
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const uint8_t*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(load_fp16(a + 2 * i) * load_fp16(b + 2 * i));
  return static_cast<float>(sum);
}

}  // namespace ns::kernels::f16
