// F32 weights x F32 activations, AVX2 + FMA.
#include "engine/kernels/avx2_util.h"
#include "engine/kernels/formats.h"

namespace ns::kernels::f32_avx2 {
namespace {

struct LoadF32 {
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static float load1(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, sizeof v);
    return v;
  }
};

// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 3 x 4 otherwise.
constexpr int kRowsSingle = 4, kRowsBatch = 3, kTokens = 4;
using Kernels = avx2::FloatKernels<LoadF32, kRowsSingle, kRowsBatch, kTokens>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::f32_avx2
