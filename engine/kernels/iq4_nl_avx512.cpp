// IQ4_NL weights x Q8_0 activations, AVX-512 + VNNI (int8_avx512.h): a byte
// shuffle looks the nibbles up in the table of levels + 128.
#include "engine/kernels/int8_avx512.h"

namespace ns::kernels::iq4_nl_avx512 {
namespace {

struct Format {
  static constexpr int64_t kBlockElems = iq4_nl::kBlockElems;
  static constexpr size_t kBlockBytes = iq4_nl::kBlockBytes;
  static constexpr size_t kQsOffset = 2;
  static constexpr int kOffset = 128;
  static constexpr bool kEvenOdd = true;  // AVX2 (block32_avx2.h) sums even and odd blocks apart
  static float scale(const uint8_t* block) { return load_fp16(block); }
  static __m256i decode(const uint8_t* qs) {
    return _mm256_shuffle_epi8(avx512::offset_table(iq4_nl::kValues), avx2::unpack_nibbles(qs));
  }
};
using Kernels = avx512::Int8Kernels<Format>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::iq4_nl_avx512
