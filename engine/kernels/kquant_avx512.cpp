// Q2_K..Q6_K weights x Q8_K activations, AVX-512 + VNNI: kquant_avx2.h's
// micro-tile loop and block decoders on an engine that takes two sub-blocks
// per step. Sub-blocks 2s and 2s + 1 share a 512-bit register (the lower and
// upper half of the decoded bytes, the scales and the 64 activation bytes,
// contiguous in Q8_K); maddubs gives the int16 pair sums as AVX2's does, the
// offset of Q3_K and Q6_K comes off as there, and vpdpwssd multiplies them by
// the scales and adds them to the int32 lanes in one instruction (AVX2:
// madd, add). After the four steps the two halves are added: the same exact
// integers as AVX2's 8 lanes, so the float side, shared, gives AVX2's bits.
#include "engine/kernels/int8_avx512.h"
#include "engine/kernels/kquant_avx2.h"

namespace ns::kernels {
namespace {

struct Avx512 {
  static constexpr int kSteps = 4;
  using Vec = __m512i;
  template <class D>
  [[gnu::always_inline]] static void decode(const typename D::Row& row, const uint8_t* wr, int s, Vec* q, Vec* sc) {
    __m256i q0, q1, s0, s1;
    D::decode(row, wr, 2 * s, &q0, &s0);
    D::decode(row, wr, 2 * s + 1, &q1, &s1);
    *q = avx512::join(q0, q1);
    *sc = avx512::join(s0, s1);
  }
  static Vec load_x(const uint8_t* qs, int s) { return _mm512_loadu_si512(qs + 64 * s); }
  template <class D>
  static Vec offset(Vec x) {
    return D::kOffset == 0 ? x : _mm512_maddubs_epi16(_mm512_set1_epi8(static_cast<char>(D::kOffset)), x);
  }
  template <class D>
  static Vec dot(Vec sum, Vec q, Vec sc, Vec x, Vec off) {
    __m512i p16 = _mm512_maddubs_epi16(q, x);
    if constexpr (D::kOffset != 0) p16 = _mm512_sub_epi16(p16, off);
    return _mm512_dpwssd_epi32(sum, sc, p16);
  }
  static __m256i lanes(Vec sum) {
    return _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
  }
};

// Shapes: as AVX2's (kquant_avx2.cpp).
template <class D>
using K = kq_simd::Kernels<D, Avx512, 4, 2, 4>;

}  // namespace

NS_KQUANT_SIMD_ENTRY_POINTS(avx512)

}  // namespace ns::kernels
