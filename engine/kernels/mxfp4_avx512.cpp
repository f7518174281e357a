// MXFP4 weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): a byte
// shuffle looks the E2M1 codes up in the table of doubled values + 128,
// under the block's E8M0 scale (halved, see formats.h).
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::mxfp4_avx512 {

using Kernels = avx512::Int8Kernels<avx2::block32::MXFP4>;

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::mxfp4_avx512
