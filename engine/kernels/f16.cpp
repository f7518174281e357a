// F16 weights: scalar reference. Activations are rounded to F16 too (as ggml
// does), so a product of two halves is exact in float.
#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::f16 {

void dequantize(const void* src, float* dst, int64_t n) { widen_row<load_fp16>(src, dst, n); }

void quantize(const float* src, void* dst, int64_t n) { narrow_row<float_to_half>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return float_row_dot<2, load_fp16>(w, x, n); }

}  // namespace ns::kernels::f16
