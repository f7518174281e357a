// TQ1_0 weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h). Sub-block v gathers the 32 bytes whose digits it holds
// (iquant.h: qs[0..31] digit v for v < 5; then qs[32..47] digits 0, 1 / 2, 3
// / 4 with qh's digits 0..3 last) and the power of 3 each byte is multiplied
// by; the product mod 256 is two 16-bit multiplies (even and odd bytes), and
// the digit (t * 3) >> 8 is (t > 85) + (t > 170). Weights are digit - 1,
// scale 1.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::tq1_0_avx2 {
namespace {

using L = iq::Tq1;

// digit - 1 of each byte of src times the byte of pow3 beside it.
inline __m256i weights(__m256i src, __m256i pow3) {
  const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(src, pow3), _mm256_set1_epi16(0x00ff));
  const __m256i odd = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(src, 8), _mm256_srli_epi16(pow3, 8)), 8);
  // Unsigned byte compares: flip the sign bits of both sides.
  const __m256i t = _mm256_xor_si256(_mm256_or_si256(even, odd), _mm256_set1_epi8(-128));
  const __m256i above1 = _mm256_cmpgt_epi8(t, _mm256_set1_epi8(85 - 128));   // -1 where t > 85
  const __m256i above2 = _mm256_cmpgt_epi8(t, _mm256_set1_epi8(170 - 128));  // -1 where t > 170
  return _mm256_sub_epi8(_mm256_sub_epi8(_mm256_set1_epi8(-1), above1), above2);
}

inline __m256i halves(__m128i lo, __m128i hi) { return _mm256_setr_m128i(lo, hi); }

struct Decoder {
  static constexpr size_t kBytes = L::bytes;
  static constexpr float kFactor = 1.0f;
  static float scale(const uint8_t* blk) { return load_fp16(blk + L::d); }
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    static constexpr char kPow3[5] = {1, 3, 9, 27, 81};
    __m256i w;
    if (v < 5) {
      w = weights(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L::qs)), _mm256_set1_epi8(kPow3[v]));
    } else {
      const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L::qs + 32));
      if (v < 7) {
        const int n = 2 * (v - 5);
        w = weights(halves(tail, tail), halves(_mm_set1_epi8(kPow3[n]), _mm_set1_epi8(kPow3[n + 1])));
      } else {
        const __m128i qh = _mm_set1_epi32(static_cast<int>(iq::load_u32(blk + L::qh)));  // qh[j] at 4n + j
        const __m128i qh_pow3 = _mm_setr_epi8(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
        w = weights(halves(tail, qh), halves(_mm_set1_epi8(kPow3[4]), qh_pow3));
      }
    }
    *wabs = _mm256_abs_epi8(w);
    *wsign = w;
    *sc = _mm256_set1_epi16(1);
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::tq1_0_avx2
