// IQ2_S weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block decodes to 4 grid entries of 8 magnitudes and
// the sign-factor words of its 4 sign bytes; its two scales 2s + 1 cover its
// two halves, and the float sum is scaled by 1/8 at the end.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq2_s_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq2s, 0.125f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    *wabs = iq_avx2::grid4(iq::kIq2sGrid[iq::iq2s_index(blk, v, 0)], iq::kIq2sGrid[iq::iq2s_index(blk, v, 1)],
                           iq::kIq2sGrid[iq::iq2s_index(blk, v, 2)], iq::kIq2sGrid[iq::iq2s_index(blk, v, 3)]);
    *wsign = iq_avx2::signs4(iq::iq2s_signs(blk, v, 0), iq::iq2s_signs(blk, v, 1), iq::iq2s_signs(blk, v, 2),
                             iq::iq2s_signs(blk, v, 3));
    const uint8_t* scales = blk + iq::Iq2s::scales;
    *sc = iq_avx2::scale_halves(2 * iq::iq2_half_scale(scales, v, 0) + 1, 2 * iq::iq2_half_scale(scales, v, 1) + 1);
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq2_s_avx2
