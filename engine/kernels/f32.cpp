// F32 weights: scalar reference. Activations stay F32.
#include <cstring>

#include "engine/kernels/formats.h"

namespace ns::kernels::f32 {

void dequantize(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

void quantize(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

namespace {

// A row at an arbitrary stride need not be float-aligned.
float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

// As ggml's scalar path: float products, double accumulator.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const uint8_t*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(load_f32(a + 4 * i) * load_f32(b + 4 * i));
  return static_cast<float>(sum);
}

}  // namespace ns::kernels::f32
