// Q1_0 weights x Q8_0 activations, AVX2, in ggml's x86 arithmetic: per
// weight block, its four activation blocks' exact sums (8 int32 lanes of 4
// elements each) are scaled by their d_x into a vector partial (FMAs from
// zero), which one FMA with d_w adds to the accumulator; one horizontal sum
// at the end.
// Per activation block: the 32 sign bits spread to bytes of +1 (bit set) or
// -1, sign_epi8 gives the activations those signs, and maddubs with ones then
// madd with ones sum them in fours.
#include <cstring>

#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::q1_0_avx2 {
namespace {

constexpr int kActBlocks = q1_0::kBlockElems / q8_0::kBlockElems;

// The 32 bits at p to 32 bytes: byte j is +1 where bit j is set, else -1.
inline __m256i signs(const uint8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  // Byte j takes source byte j / 8 (each 128-bit lane holds all four), then tests its own bit j % 8.
  const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i picked = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(bits), which), bit);
  const __m256i clear = _mm256_cmpeq_epi8(picked, _mm256_setzero_si256());  // -1 where the bit is clear
  return _mm256_or_si256(clear, _mm256_set1_epi8(1));
}

struct Format : avx2::StepFormat<q1_0::kBlockElems, q1_0::kBlockBytes, kActBlocks * q8_0::kBlockBytes> {
  template <int R, int T>
  static void step(const uint8_t* wb, size_t ws, const uint8_t* xb, size_t xs, __m256 (&acc)[R][T]) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 partial[R][T];
    avx2::zero_tile(partial);  // an FMA onto zero is ggml's first multiply, rounded once
#pragma GCC unroll 4
    for (int k = 0; k < kActBlocks; ++k) {
      __m256i s[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        if (k == 0) avx2::prefetch_next_rows(wb + r * ws, R, ws);
        s[r] = signs(wb + r * ws + 2 + 4 * k);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* xk = xb + t * xs + k * q8_0::kBlockBytes;
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk + 2));
        const __m256 dx = avx2::broadcast_fp16(xk);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // |x| <= 127, so the pairs of ones * x fit int16.
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_sign_epi8(xq, s[r])), ones16);
          const __m256 pf = _mm256_cvtepi32_ps(p);
          partial[r][t] = _mm256_fmadd_ps(dx, pf, partial[r][t]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 dw = avx2::broadcast_fp16(wb + r * ws);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(dw, partial[r][t], acc[r][t]);
    }
  }
};

// Shapes: those of the table-lookup formats (iq4_nl_avx2.cpp), not tuned separately.
using Kernels = avx2::StepKernels<Format, 4, 2, 4>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q1_0_avx2
