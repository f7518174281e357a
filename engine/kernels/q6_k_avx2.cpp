// Q6_K weights x Q8_K activations, AVX2, in ggml's arithmetic (its x86
// kernel's lanes and float order, so results match it bit for bit). Per 32
// elements the 6-bit level q (ql nibble | 2 qh bits << 4, in [0, 63]) goes
// into maddubs unsigned against the activations (signed), the -32 comes off
// as 32 * (pairwise sums of x), computed once per activation vector and
// shared by the R rows, and madd against the two sub-blocks' int8 scales
// widens to int32. The super-block's sum stays exact in 8 int32 lanes; one
// float FMA applies d_x d_w.
// Each super-block prefetches the lines the next micro-tile reads, R rows
// further down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q6_k_avx2 {
namespace {

using WL = kq::Q6K;
using XL = kq::Q8K;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / kq::kElems;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  __m256 acc[R][T];
  avx2::zero_tile(acc);

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * WL::bytes;
    const uint8_t* xb = x + b * XL::bytes;
    avx2::prefetch_next_blocks<R>(wb, ws, WL::bytes);
    // Per row: the int8 scales of sub-blocks 8h..8h+7 as int16 in both lanes of scales[h].
    __m256i scales[R][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i all =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + r * ws + WL::scales)));
      scales[r][0] = _mm256_permute2x128_si256(all, all, 0x00);
      scales[r][1] = _mm256_permute2x128_si256(all, all, 0x11);
    }
    __m256i sum[R][T];
    avx2::zero_tile(sum);

#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // elements 32 v..: h = v / 4, k = v % 4 (see kquant.h)
      const int h = v / 4, k = v % 4;
      __m256i q[R], sc[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* wr = wb + r * ws;
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + WL::ql + 64 * h + 32 * (k % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + WL::qh + 32 * h));
        const __m256i low = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
        // Bits 2k, 2k + 1 of every qh byte to bits 4, 5 (16-bit shifts: bits
        // crossing into the neighbour byte land outside the mask).
        const __m256i high =
            _mm256_and_si256(k <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2 * k - 4), bits45);
        q[r] = _mm256_or_si256(low, high);
        sc[r] = _mm256_shuffle_epi8(scales[r][h], avx2::pick_pair(k));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + t * xs + XL::qs + 32 * v));
        const __m256i offset = _mm256_maddubs_epi16(_mm256_set1_epi8(32), q8);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // Pairs of q * x and of 32 * x stay within int16 (2 * 63 * 127); times the scale (|sc| <= 128) in int32.
          const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q[r], q8), offset);
          sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(sc[r], p16));
        }
      }
    }

#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const float dx = kq::load_f32(xb + t * xs + XL::d);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_set1_ps(dx * load_fp16(wb + r * ws + WL::d));
        acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
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

}  // namespace ns::kernels::q6_k_avx2
