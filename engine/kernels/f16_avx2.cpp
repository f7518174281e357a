// F16 weights x F16 activations, AVX2 + FMA + F16C (widened to float, FMA in float).
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::f16_avx2 {
namespace {

struct LoadF16 {
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float load1(const uint8_t* row, int64_t k) { return avx2::load_half(row + 2 * k); }
};

template <int R, int T>
struct Micro {
  static void run(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* y, int64_t ys) {
    avx2::float_micro<LoadF16, R, T>(w, ws, x, xs, n, y, ys);
  }
};

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 3 x 4 otherwise.
constexpr int kRowsSingle = 4, kRowsBatch = 3, kTokens = 4;
constexpr avx2::MicroTable<Micro, kRowsSingle, kTokens> kMicro;

}  // namespace

// F16C rounds to nearest even, handles subnormals and quiets NaNs: the same
// halves as the scalar conversion.
void quantize(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) store_u16(out + 2 * i, _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

float vec_dot(const void* w, const void* x, int64_t n) {
  float y;
  Micro<1, 1>::run(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n, &y, 0);
  return y;
}

void tile(const Tile& t) { avx2::run_micro_tiles(t, kMicro, kRowsSingle, kRowsBatch); }

}  // namespace ns::kernels::f16_avx2
