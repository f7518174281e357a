// BF16 weights x BF16 activations, AVX2 + FMA (a bf16 widens to float by a shift).
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::bf16_avx2 {
namespace {

struct LoadBF16 {
  static __m256 load8(const uint8_t* row, int64_t k) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const uint8_t* row, int64_t k) {
    const uint32_t bits = static_cast<uint32_t>(load_u16(row + 2 * k)) << 16;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
};

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 2 x 4 otherwise.
constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 4;
using Kernels = avx2::FloatKernels<LoadBF16, kRowsSingle, kRowsBatch, kTokens>;

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace

// Round to nearest even on the 16 dropped bits; NaNs become quiet NaNs. Same
// bits as the scalar fp32_to_bf16.
void quantize(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(v);
    const __m256i high = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(high, one))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // Every lane is below 0x10000, so the unsigned saturating pack is exact.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), packed);
  }
  for (; i < n; ++i) store_u16(out + 2 * i, to_bf16(src[i]));
}

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::bf16_avx2
