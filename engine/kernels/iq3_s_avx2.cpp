// IQ3_S weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block decodes to 8 grid entries of 4 magnitudes and
// the sign-factor words of its 4 sign bytes; its scale 2s + 1 covers all 32
// elements.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq3_s_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq3s, 1.0f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const auto g = [&](int k) { return static_cast<int>(iq::kIq3sGrid[iq::iq3s_index(blk, v, k)]); };
    *wabs = _mm256_setr_epi32(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
    *wsign = iq_avx2::signs4(iq::iq3s_signs(blk, v, 0), iq::iq3s_signs(blk, v, 1), iq::iq3s_signs(blk, v, 2),
                             iq::iq3s_signs(blk, v, 3));
    *sc = _mm256_set1_epi16(static_cast<int16_t>(iq::iq3s_scale(blk, v)));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq3_s_avx2
