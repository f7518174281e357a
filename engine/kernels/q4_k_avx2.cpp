// Q4_K weights x Q8_K activations, AVX2, in ggml's arithmetic (its x86
// kernel's lanes and float order, so results match it bit for bit): per
// super-block and 32-element sub-block, maddubs multiplies the nibbles
// (unsigned) with the activations (signed) and madd against the sub-block's
// scale widens to int32, so a super-block's sum stays exact in 8 int32 lanes,
// applied with one float FMA of d_x d_w; the mins meet the activations' run
// sums in one madd and go into a 4-lane accumulator of their own with
// -d_x dmin_w. The two accumulators are summed at the end.
// Each super-block prefetches the lines the next micro-tile reads, R rows
// further down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q4_k_avx2 {
namespace {

using WL = kq::Q4K;
using XL = kq::Q8K;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / kq::kElems;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc[R][T];
  __m128 acc_m[R][T];
  avx2::zero_tile(acc);
  avx2::zero_tile(acc_m);

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * WL::bytes;
    const uint8_t* xb = x + b * XL::bytes;
    avx2::prefetch_next_blocks<R>(wb, ws, WL::bytes);
    __m256i scales[R];
    __m128i mins[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) avx2::unpack_k4_scales(wb + r * ws + WL::scales, &scales[r], &mins[r]);
    __m256i sum[R][T];
    avx2::zero_tile(sum);

#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // sub-block v: nibble half v % 2 of qs[32 (v / 2) ...]
      __m256i q[R], sc[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + r * ws + WL::qs + 32 * (v / 2)));
        q[r] = _mm256_and_si256(v % 2 == 0 ? bits : _mm256_srli_epi16(bits, 4), low4);
        sc[r] = _mm256_shuffle_epi8(scales[r], avx2::pick_one(v));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + t * xs + XL::qs + 32 * v));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // Pairs of q * x stay within int16 (2 * 15 * 127); times the scale (<= 63) in int32.
          sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(sc[r], _mm256_maddubs_epi16(q[r], q8)));
        }
      }
    }

#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xt = xb + t * xs;
      const float dx = kq::load_f32(xt + XL::d);
      const __m128i sums32 = avx2::q8k_sums32(xt + XL::bsums);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* wr = wb + r * ws;
        const __m128 m = _mm_cvtepi32_ps(_mm_madd_epi16(mins[r], sums32));
        acc_m[r][t] = _mm_fmadd_ps(_mm_set1_ps(-dx * load_fp16(wr + WL::dmin)), m, acc_m[r][t]);
        acc[r][t] =
            _mm256_fmadd_ps(_mm256_set1_ps(dx * load_fp16(wr + WL::d)), _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      __m128 m = _mm_add_ps(acc_m[r][t], _mm_movehl_ps(acc_m[r][t], acc_m[r][t]));
      m = _mm_add_ss(m, _mm_movehdup_ps(m));
      y[t * ys + r] = avx2::hsum(acc[r][t]) + _mm_cvtss_f32(m);
    }
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

}  // namespace ns::kernels::q4_k_avx2
