// Q8_0 weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): the int8 weights as stored.
// Also the AVX2 activation quantizer for every format dotted against Q8_0.
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::q8_0_avx2 {

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 2 x 4 otherwise.
using Kernels = avx2::Block32Kernels<avx2::block32::Q8_0, 4, 2, 4>;

// As ggml's x86 quantize_row_q8_0: d = amax / 127, q = x * (127 / amax)
// rounded half to even. Differs from the reference only on rounding ties.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / q8_0::kBlockElems; ++b, blk += q8_0::kBlockBytes, src += q8_0::kBlockElems) {
    __m256i q[4];
    const float amax = avx2::quantize_q8_lanes(src, q);
    store_u16(blk, _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 2), avx2::pack_q8(q));
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }
void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q8_0_avx2
