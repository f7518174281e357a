// TQ2_0 weights x Q8_K activations, AVX2, on the shared i-quant micro-kernel
// (iquant_avx2.h): sub-block v takes bits 2 (v % 4) of the 32 bytes of
// qs[32 (v / 4) ...] and subtracts 1, giving weights -1, 0, 1 (and 2 for the
// unused code 3, as the scalar reference reads it); scale 1.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant_avx2.h"

namespace ns::kernels::tq2_0_avx2 {
namespace {

struct Decoder : iq_avx2::Fp16Super<iq::Tq2, 1.0f> {
  static void decode(const uint8_t* blk, int v, __m256i* wabs, __m256i* wsign, __m256i* sc) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + iq::Tq2::qs + 32 * (v / 4)));
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * (v % 4)), _mm256_set1_epi8(3));
    const __m256i w = _mm256_sub_epi8(q, _mm256_set1_epi8(1));
    *wabs = _mm256_abs_epi8(w);
    *wsign = w;
    *sc = _mm256_set1_epi16(1);
  }
};

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return iq_avx2::Kernels<Decoder>::vec_dot(w, x, n); }
void tile(const Tile& t) { iq_avx2::Kernels<Decoder>::tile(t); }

}  // namespace ns::kernels::tq2_0_avx2
