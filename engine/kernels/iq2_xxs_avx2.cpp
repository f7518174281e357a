// IQ2_XXS weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block decodes to 4 grid entries of 8 magnitudes and
// 4 sign-factor words looked up from its 7-bit sign fields; its scale 2s + 1
// covers all 32 elements, and the float sum is scaled by 1/8 at the end.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq2_xxs_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq2xxs, 0.125f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const uint32_t word = iq::iq2xxs_signs_scale(blk, v);
    const uint8_t* idx = blk + iq::Iq2xxs::qs + 8 * v;
    *wabs = iq_avx2::grid4(iq::kIq2xxsGrid[idx[0]], iq::kIq2xxsGrid[idx[1]], iq::kIq2xxsGrid[idx[2]],
                           iq::kIq2xxsGrid[idx[3]]);
    *wsign = iq_avx2::signs4(iq::signs7(word, 0), iq::signs7(word, 1), iq::signs7(word, 2), iq::signs7(word, 3));
    *sc = _mm256_set1_epi16(static_cast<int16_t>(2 * (word >> 28) + 1));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq2_xxs_avx2
