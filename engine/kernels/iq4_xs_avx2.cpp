// IQ4_XS weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block's nibbles unpack to bytes in element order and
// a byte shuffle looks them up in IQ4_NL's 16 levels (as iq4_nl_avx2.cpp);
// its scale ls - 32 covers all 32 elements.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::iq4_xs_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq4xs, 1.0f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const __m256i levels =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(iq4_nl::kValues)));
    const __m256i w = _mm256_shuffle_epi8(levels, avx2::unpack_nibbles(blk + iq::Iq4xs::qs + 16 * v));
    *wabs = _mm256_abs_epi8(w);
    *wsign = w;
    *sc = _mm256_set1_epi16(static_cast<int16_t>(iq::iq4xs_scale(blk, v)));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq4_xs_avx2
