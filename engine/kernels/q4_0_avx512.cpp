// Q4_0 weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): the
// nibbles as stored are w + 8, unsigned bytes once unpacked.
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::q4_0_avx512 {

using Kernels = avx512::Int8Kernels<avx2::block32::Q4_0>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q4_0_avx512
