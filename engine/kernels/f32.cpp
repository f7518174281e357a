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

float vec_dot(const void* w, const void* x, int64_t n) { return float_row_dot<4, load_f32>(w, x, n); }

}  // namespace ns::kernels::f32
