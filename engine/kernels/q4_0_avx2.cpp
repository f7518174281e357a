// Q4_0 weights x Q8_0 activations, AVX2, on the 32-element block loop
// (block32_avx2.h): the nibbles as stored are unsigned codes w + 8.
#include "engine/kernels/block32_avx2.h"

namespace ns::kernels::q4_0_avx2 {
namespace {

struct Format {
  static constexpr size_t kBlockBytes = q4_0::kBlockBytes;
  static constexpr bool kSigned = false, kMin = false, kEvenOdd = false;
  static constexpr int kOffset = 8;
  static float scale(const uint8_t* block) { return load_fp16(block); }
  static __m256i decode(const uint8_t* block) { return avx2::unpack_nibbles(block + 2); }
};
// Shapes measured on a Sapphire Rapids core (4096-wide rows, best of
// interleaved runs): 4 rows for a lone token, 3 x 4 otherwise.
using Kernels = avx2::Block32Kernels<Format, 4, 3, 4>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q4_0_avx2
