// IQ1_S weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h). The shift delta = +-1/8 is folded into the weights: a
// sub-block decodes to w = 8 grid + (+-1), in {-9, -7, -1, 1, 7, 9}, by a byte
// shuffle of the grid values, so the sum of ls * w * x is 8 times ggml's
// integer sum plus its delta term, exactly; the float sum is scaled by 1/8.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq1_s_avx2 {
namespace {

// 8 g + delta by the low nibble of g: 0 for 0, 1 for 1, 15 for -1 (0xff).
inline __m256i shift_table(int delta) {
  const auto c = [](int v) { return static_cast<char>(v); };
  const __m128i t = _mm_setr_epi8(c(delta), c(8 + delta), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, c(-8 + delta));
  return _mm256_broadcastsi128_si256(t);
}

struct Decoder : iq_avx2::Fp16Super<iq::Iq1s, 0.125f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const uint16_t qh = iq::iq1s_qh(blk, v);
    const __m256i g =
        iq_avx2::grid4(iq::kIq1sGrid[iq::iq1s_index(blk, v, 0)], iq::kIq1sGrid[iq::iq1s_index(blk, v, 1)],
                       iq::kIq1sGrid[iq::iq1s_index(blk, v, 2)], iq::kIq1sGrid[iq::iq1s_index(blk, v, 3)]);
    const __m256i table = shift_table(iq::iq1s_negative_delta(qh) ? -1 : 1);
    const __m256i w = _mm256_shuffle_epi8(table, _mm256_and_si256(g, _mm256_set1_epi8(0x0f)));
    *wabs = _mm256_abs_epi8(w);
    *wsign = w;
    *sc = _mm256_set1_epi16(static_cast<int16_t>(iq::iq1s_scale(qh)));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq1_s_avx2
