// Q2_K weights x Q8_K activations, AVX2, in ggml's arithmetic: per 32
// elements, maddubs multiplies the 2-bit levels (unsigned) with the
// activations (signed) and madd against the two 16-element sub-blocks'
// scales widens to int32, so a super-block's sum stays exact in 8 int32
// lanes; the 4-bit mins meet the activations' bsums in one madd. Then two
// float FMAs per super-block: -d_x dmin_w * mins, d_x d_w * sum.
// Each super-block prefetches the lines the next micro-tile reads, R rows
// further down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q2_k_avx2 {
namespace {

using WL = kq::Q2K;
using XL = kq::Q8K;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / kq::kElems;
  const __m256i low2 = _mm256_set1_epi8(3);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  __m256 acc[R][T];
  avx2::zero_tile(acc);

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * WL::bytes;
    const uint8_t* xb = x + b * XL::bytes;
    avx2::prefetch_next_blocks<R>(wb, ws, WL::bytes);
    // Per row: the 16 scales as int16, sub-blocks 8h..8h+7 in both lanes of
    // scales[h]; the 16 mins as int16.
    __m256i scales[R][2], mins[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + r * ws + WL::scales));
      const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, low4));
      scales[r][0] = _mm256_permute2x128_si256(sc16, sc16, 0x00);
      scales[r][1] = _mm256_permute2x128_si256(sc16, sc16, 0x11);
      mins[r] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    }
    __m256i sum[R][T];
    avx2::zero_tile(sum);

#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // elements 32 v..32 v + 31: bits 2k of qs[32 h ...], h = v / 4, k = v % 4
      const int h = v / 4, k = v % 4;
      __m256i q[R], sc[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + r * ws + WL::qs + 32 * h));
        q[r] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), low2);
        sc[r] = _mm256_shuffle_epi8(scales[r][h], avx2::pick_pair(k));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + t * xs + XL::qs + 32 * v));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // Pairs of q * x stay within int16 (2 * 3 * 127); times the scale (<= 15) in int32.
          sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(sc[r], _mm256_maddubs_epi16(q[r], q8)));
        }
      }
    }

#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xt = xb + t * xs;
      const float dx = kq::load_f32(xt + XL::d);
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + XL::bsums));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* wr = wb + r * ws;
        const __m256 m = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins[r], bsums));
        acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(-dx * load_fp16(wr + WL::dmin)), m, acc[r][t]);
        acc[r][t] =
            _mm256_fmadd_ps(_mm256_set1_ps(dx * load_fp16(wr + WL::d)), _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]);
}

// Shapes: 4 rows for a lone token, 2 x 4 otherwise (8 int32 sums and 8 float
// accumulators); 3 x 4 and 4 x 2 measured the same or slower within noise on
// one core of a shared Sapphire Rapids VM, 4096-wide rows.
constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 4;
constexpr avx2::MicroTable<Micro, kRowsSingle, kTokens> kMicro;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) {
  float y;
  Micro<1, 1>::run(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n, &y, 0);
  return y;
}

void tile(const Tile& t) { avx2::run_micro_tiles(t, kMicro, kRowsSingle, kRowsBatch); }

}  // namespace ns::kernels::q2_k_avx2
