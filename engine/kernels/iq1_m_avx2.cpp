// IQ1_M weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h). As for IQ1_S the shifts are folded into the weights,
// w = 8 grid + (+-1), here with one sign per group of 8: a byte shuffle makes
// 8 grid and a vector of +-1 bytes (one sign-factor word per group) is added.
// The two 3-bit scales of a sub-block cover its two halves; the float sum is
// scaled by 1/8.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::iq1_m_avx2 {
namespace {

struct Decoder {
  static constexpr size_t kBytes = iq::Iq1m::bytes;
  static constexpr float kFactor = 0.125f;
  static float scale(const uint8_t* blk) { return fp16_table.value[iq::iq1m_d_bits(blk)]; }
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const __m256i g =
        iq_avx2::grid4(iq::kIq1sGrid[iq::iq1m_index(blk, v, 0)], iq::kIq1sGrid[iq::iq1m_index(blk, v, 1)],
                       iq::kIq1sGrid[iq::iq1m_index(blk, v, 2)], iq::kIq1sGrid[iq::iq1m_index(blk, v, 3)]);
    // 8 g by the low nibble of g: 0 for 0, 1 for 1, 15 for -1 (0xff).
    const __m256i times8 = _mm256_setr_epi8(0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -8,  //
                                            0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -8);
    // A sign mask of 0xff makes every byte -1, of 0 every byte +1.
    const auto delta = [&](int l) -> uint8_t { return iq::iq1m_negative_delta(blk, v, l) ? 0xff : 0; };
    const __m256i w = _mm256_add_epi8(_mm256_shuffle_epi8(times8, _mm256_and_si256(g, _mm256_set1_epi8(0x0f))),
                                      iq_avx2::signs4(delta(0), delta(1), delta(2), delta(3)));
    *wabs = _mm256_abs_epi8(w);
    *wsign = w;
    *sc = iq_avx2::scale_halves(iq::iq1m_scale(blk, v, 0), iq::iq1m_scale(blk, v, 1));
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::iq1_m_avx2
