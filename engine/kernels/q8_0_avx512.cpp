// Q8_0 weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): the weight
// bytes with their sign bit flipped are w + 128 as unsigned bytes.
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::q8_0_avx512 {

using Kernels = avx512::Int8Kernels<avx2::block32::Q8_0>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q8_0_avx512
