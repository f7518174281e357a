// MXFP4 weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): IQ4_NL's kernel with the E2M1 table and the E8M0 block
// scale. ggml's x86 kernel for MXFP4 is IQ4_NL's with the other table and
// scale, float order included.
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::mxfp4_avx2 {

// Shapes: IQ4_NL's.
using Kernels = avx2::Block32Kernels<avx2::block32::MXFP4, 4, 2, 4>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::mxfp4_avx2
