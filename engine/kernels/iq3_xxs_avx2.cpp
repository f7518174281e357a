// IQ3_XXS weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block decodes to 8 grid entries of 4 magnitudes and
// 4 sign-factor words looked up from its 7-bit sign fields; its scale 2s + 1
// covers all 32 elements, and the float sum is scaled by 1/4 at the end.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq3_xxs_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq3xxs, 0.25f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const uint32_t word = iq::iq3xxs_signs_scale(blk, v);
    const auto g = [&](int k) { return static_cast<int>(iq::kIq3xxsGrid[iq::iq3xxs_index(blk, v, k)]); };
    *wabs = _mm256_setr_epi32(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
    *wsign = iq_avx2::signs4(iq::signs7(word, 0), iq::signs7(word, 1), iq::signs7(word, 2), iq::signs7(word, 3));
    *sc = _mm256_set1_epi16(static_cast<int16_t>(2 * (word >> 28) + 1));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq3_xxs_avx2
