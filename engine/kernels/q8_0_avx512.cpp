// Q8_0 weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): the weight
// bytes with their sign bit flipped are w + 128 as unsigned bytes.
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::q8_0_avx512 {
namespace {

struct Format {
  static constexpr int64_t kBlockElems = q8_0::kBlockElems;
  static constexpr size_t kBlockBytes = q8_0::kBlockBytes;
  static constexpr size_t kQsOffset = 2;
  static constexpr int kOffset = 128;
  static constexpr bool kEvenOdd = false;  // AVX2 sums the blocks in order
  static float scale(const uint8_t* block) { return load_fp16(block); }
  static __m256i decode(const uint8_t* qs) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};
using Kernels = avx512::Int8Kernels<Format>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::q8_0_avx512
