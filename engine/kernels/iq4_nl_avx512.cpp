// IQ4_NL weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): a byte
// shuffle looks the nibbles up in the table of levels + 128.
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::iq4_nl_avx512 {

using Kernels = avx512::Int8Kernels<avx2::block32::IQ4_NL>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::iq4_nl_avx512
