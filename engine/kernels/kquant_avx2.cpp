// Q2_K..Q6_K weights x Q8_K activations, AVX2: kquant_avx2.h's micro-tile
// loop with each format's block decoder on the AVX2 engine.
//
// Shapes: 4 rows for a lone token, 2 x 4 otherwise (8 int32 sums and 8 float
// accumulators); 3 x 4 and 4 x 2 measured the same or slower within noise on
// one core of a shared Sapphire Rapids VM, 4096-wide rows.
#include "engine/kernels/kquant_avx2.h"

namespace ns::kernels {
namespace {

template <class D>
using K = kq_simd::Kernels<D, kq_simd::Avx2, 4, 2, 4>;

}  // namespace

NS_KQUANT_SIMD_ENTRY_POINTS(avx2)

}  // namespace ns::kernels
