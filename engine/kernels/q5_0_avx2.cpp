// Q5_0 weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): nibbles and fifth bits unpack to unsigned codes w + 16.
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::q5_0_avx2 {

// Shapes (as Q4_0's): 4 rows for a lone token, 3 x 4 otherwise; 2 x 4 measured
// the same within noise (one core of a shared Sapphire Rapids VM, 4096-wide rows).
using Kernels = avx2::Block32Kernels<avx2::block32::Q5_0, 4, 3, 4>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q5_0_avx2
