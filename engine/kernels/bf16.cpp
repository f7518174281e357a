// BF16 weights: scalar reference. Activations are rounded to BF16 (as ggml
// does), so a product of two bf16 values is exact in float.
#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"

namespace ns::kernels::bf16 {
namespace {

float load_bf16(const uint8_t* p) { return bf16_bits_to_float(load_u16(p)); }

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { widen_row<load_bf16>(src, dst, n); }

void quantize(const float* src, void* dst, int64_t n) { narrow_row<float_to_bf16_bits>(src, dst, n); }

float vec_dot(const void* w, const void* x, int64_t n) { return float_row_dot<2, load_bf16>(w, x, n); }

}  // namespace ns::kernels::bf16
