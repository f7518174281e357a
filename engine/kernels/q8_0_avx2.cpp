// Q8_0 weights x Q8_0 activations, AVX2: exact int8 products per block
// (maddubs on |w| and x carrying w's sign, then madd to int32), one float FMA
// per block with the product of the two scales.
// Also the AVX2 activation quantizer for every format dotted against Q8_0.
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::q8_0_avx2 {
namespace {

constexpr size_t kBytes = q8_0::kBlockBytes;

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys);
};

template <int R, int T>
void Micro<R, T>::run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
  const int64_t nb = n / q8_0::kBlockElems;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();

  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * kBytes;
    __m256i wq[R], wabs[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_rows(wb + r * ws, R, ws);
      wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + r * ws + 2));
      wabs[r] = _mm256_abs_epi8(wq[r]);  // -128 becomes 128, still right as an unsigned byte
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * xs + b * kBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
      const __m256 dx = avx2::broadcast_fp16(xb);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // |w| * (x with w's sign) = w * x; pairs sum to at most 2 * 128 * 127 in int16.
        const __m256i p16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(xq, wq[r]));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_mul_ps(avx2::broadcast_fp16(wb + r * ws), dx), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::hsum(acc[r][t]);
}

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 2 x 4 otherwise.
constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 4;
using Kernels = avx2::MicroKernels<Micro, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace

// As ggml's x86 quantize_row_q8_0: d = amax / 127, q = x * (127 / amax)
// rounded half to even. Differs from the reference only on rounding ties.
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / q8_0::kBlockElems; ++b, blk += kBytes, src += q8_0::kBlockElems) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(src + 8 * i);
    __m256 amax8 = _mm256_andnot_ps(sign_bit, v[0]);
    for (int i = 1; i < 4; ++i) amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, v[i]));
    __m128 amax4 = _mm_max_ps(_mm256_extractf128_ps(amax8, 1), _mm256_castps256_ps128(amax8));
    amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
    amax4 = _mm_max_ss(amax4, _mm_movehdup_ps(amax4));
    const float amax = _mm_cvtss_f32(amax4);

    store_u16(blk, _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // The packs work per 128-bit lane; the permute puts the 32 bytes back in order.
    const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 2), q8);
  }
}

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q8_0_avx2
