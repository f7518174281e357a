// Q5_K weights x Q8_K activations, AVX2, in ggml's arithmetic (its x86
// kernel's lanes and float order): Q4_K's kernel with the fifth bit of each
// element (qh) or'ed into its nibble before the maddubs. Per super-block the
// sum stays exact in 8 int32 lanes and takes one float FMA of d_x d_w; the
// mins' dot with the run sums is one integer, times -d_x dmin_w into a float
// summed apart and added at the end.
// Each super-block prefetches the lines the next micro-tile reads, R rows
// further down (see avx2_util.h).
#include "engine/kernels/formats.h"
#include "engine/kernels/kquant.h"
#include "engine/kernels/quant_avx2.h"

namespace ns::kernels::q5_k_avx2 {
namespace {

using WL = kq::Q5K;
using XL = kq::Q8K;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / kq::kElems;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[R][T];
  float acc_m[R][T];
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
    for (int v = 0; v < 8; ++v) {  // sub-block v: nibble half v % 2 of qs[32 (v / 2) ...], fifth bit v of qh
      __m256i q[R], sc[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* wr = wb + r * ws;
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + WL::qs + 32 * (v / 2)));
        const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + WL::qh));
        // Bit v of every byte to bit 4 (16-bit shifts: bits crossing into the
        // neighbour byte land outside the mask).
        const __m256i fifth =
            _mm256_and_si256(v <= 4 ? _mm256_slli_epi16(hbits, 4 - v) : _mm256_srli_epi16(hbits, v - 4), bit4);
        q[r] = _mm256_or_si256(_mm256_and_si256(v % 2 == 0 ? bits : _mm256_srli_epi16(bits, 4), low4), fifth);
        sc[r] = _mm256_shuffle_epi8(scales[r], avx2::pick_one(v));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + t * xs + XL::qs + 32 * v));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // Pairs of q * x stay within int16 (2 * 31 * 127); times the scale (<= 63) in int32.
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
        __m128i m = _mm_madd_epi16(mins[r], sums32);
        m = _mm_add_epi32(m, _mm_unpackhi_epi64(m, m));
        m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 1));
        const __m128 dmin = _mm_set_ss(-dx * load_fp16(wr + WL::dmin));
        acc_m[r][t] = _mm_cvtss_f32(_mm_fmadd_ss(dmin, _mm_cvtepi32_ps(m), _mm_set_ss(acc_m[r][t])));
        acc[r][t] =
            _mm256_fmadd_ps(_mm256_set1_ps(dx * load_fp16(wr + WL::d)), _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]) + acc_m[r][t];
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

}  // namespace ns::kernels::q5_k_avx2
