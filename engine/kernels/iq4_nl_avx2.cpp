// IQ4_NL weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): a byte shuffle looks the nibbles up in the 16 levels,
// under the fp16 block scale; even and odd blocks summed apart (ggml's
// x86 kernel's float order).
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::iq4_nl_avx2 {

// Shapes: 4 rows for a lone token, 2 x 4 otherwise (|w| of 3 rows would not
// stay in registers); 3 x 4 measured the same within noise on one core of a
// shared Sapphire Rapids VM, 4096-wide rows.
using Kernels = avx2::Block32Kernels<avx2::block32::IQ4_NL, 4, 2, 4>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::iq4_nl_avx2
