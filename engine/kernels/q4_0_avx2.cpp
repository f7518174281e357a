// Q4_0 weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): the nibbles as stored are unsigned codes w + 8.
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::q4_0_avx2 {

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 3 x 4 otherwise.
using Kernels = avx2::Block32Kernels<avx2::block32::Q4_0, 4, 3, 4>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q4_0_avx2
