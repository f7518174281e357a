// IQ2_XS weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): a sub-block decodes to 4 grid entries of 8 magnitudes and
// 4 sign-factor words looked up from the 7-bit sign fields; its two scales
// 2s + 1 cover its two halves, and the float sum is scaled by 1/8 at the end.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq2_xs_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Iq2xs, 0.125f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const uint16_t f0 = iq::iq2xs_field(blk, v, 0), f1 = iq::iq2xs_field(blk, v, 1);
    const uint16_t f2 = iq::iq2xs_field(blk, v, 2), f3 = iq::iq2xs_field(blk, v, 3);
    *wabs = iq_avx2::grid4(iq::kIq2xsGrid[f0 & 511], iq::kIq2xsGrid[f1 & 511], iq::kIq2xsGrid[f2 & 511],
                           iq::kIq2xsGrid[f3 & 511]);
    *wsign = iq_avx2::signs4(iq::kSigns[f0 >> 9], iq::kSigns[f1 >> 9], iq::kSigns[f2 >> 9], iq::kSigns[f3 >> 9]);
    const uint8_t* scales = blk + iq::Iq2xs::scales;
    *sc = iq_avx2::scale_halves(2 * iq::iq2_half_scale(scales, v, 0) + 1, 2 * iq::iq2_half_scale(scales, v, 1) + 1);
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq2_xs_avx2
