// Q2_0 weights x Q8_0 activations, AVX2. ggml's x86 build runs the generic
// dot for Q2_0 (arch-fallback.h), so this kernel computes the same exact
// integer sum of each 32-element half and then repeats its float operations
// one by one (d_x * sum into a partial, d_w * partial into the total): the
// result is the scalar reference's, bit for bit.
// Per half: the 8 code bytes spread to 32 bytes in element order (byte j
// takes byte j / 4, then two bit tests give its code q in 0..3); maddubs
// multiplies q (unsigned) with the activations, the -1 offset comes off as the
// activations' pairwise sums (once per token, shared by the rows), madd to
// int32, and the two halves' lanes are summed together horizontally.
#include <cstring>

#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::q2_0_avx2 {
namespace {

// The 32 codes of the 8 bytes at qs, one per byte in element order.
inline __m256i codes(const uint8_t* qs) {
  int64_t bits;
  std::memcpy(&bits, qs, sizeof bits);
  const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,  //
                                         4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi64x(bits), which);
  const __m256i lo_bit = _mm256_set1_epi32(0x40100401);  // bit 2 (j % 4) in byte j
  const __m256i hi_bit = _mm256_set1_epi32(static_cast<int>(0x80200802u));
  const __m256i lo = _mm256_cmpeq_epi8(_mm256_and_si256(b, lo_bit), lo_bit);  // -1 where set
  const __m256i hi = _mm256_cmpeq_epi8(_mm256_and_si256(b, hi_bit), hi_bit);
  return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(lo, _mm256_add_epi8(hi, hi)));
}

// The two exact int32 totals of a and b's lanes.
inline void hsum_pair(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

// acc + dw * ((0 + dx0 * s0) + dx1 * s1), each operation rounded on its own
// as in ggml's generic code. Written with scalar SSE intrinsics: the compiler
// would contract plain float expressions in this FMA-enabled file.
inline float scaled_sum(float acc, float dw, float dx0, int32_t s0, float dx1, int32_t s1) {
  __m128 partial = _mm_add_ss(_mm_setzero_ps(), _mm_mul_ss(_mm_set_ss(dx0), _mm_cvtsi32_ss(_mm_setzero_ps(), s0)));
  partial = _mm_add_ss(partial, _mm_mul_ss(_mm_set_ss(dx1), _mm_cvtsi32_ss(_mm_setzero_ps(), s1)));
  return _mm_cvtss_f32(_mm_add_ss(_mm_set_ss(acc), _mm_mul_ss(_mm_set_ss(dw), partial)));
}

struct Format : avx2::StepFormat<q2_0::kBlockElems, q2_0::kBlockBytes, 2 * q8_0::kBlockBytes, true> {
  template <int R, int T>
  static void step(const uint8_t* wb, size_t ws, const uint8_t* xb, size_t xs, float (&acc)[R][T]) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i q0[R], q1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_rows(wb + r * ws, R, ws);
      q0[r] = codes(wb + r * ws + 2);
      q1[r] = codes(wb + r * ws + 2 + 8);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xt = xb + t * xs;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 2));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + q8_0::kBlockBytes + 2));
      // Pairwise sums stay within int16: |q x| pairs <= 2 * 3 * 127, |x| pairs <= 254.
      const __m256i off0 = _mm256_maddubs_epi16(ones8, x0);
      const __m256i off1 = _mm256_maddubs_epi16(ones8, x1);
      const float dx0 = load_fp16(xt), dx1 = load_fp16(xt + q8_0::kBlockBytes);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i p0 = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q0[r], x0), off0), ones16);
        const __m256i p1 = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q1[r], x1), off1), ones16);
        int32_t s0, s1;
        hsum_pair(p0, p1, &s0, &s1);
        acc[r][t] = scaled_sum(acc[r][t], load_fp16(wb + r * ws), dx0, s0, dx1, s1);
      }
    }
  }
};

// Shapes: those of the table-lookup formats (iq4_nl_avx2.cpp), not tuned separately.
using Kernels = avx2::StepKernels<Format, 4, 2, 4>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q2_0_avx2
