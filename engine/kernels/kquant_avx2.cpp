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

float q2_k_avx2::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q2K>::vec_dot(w, x, n); }
void q2_k_avx2::tile(const Tile& t) { K<kq_simd::Q2K>::tile(t); }
float q3_k_avx2::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q3K>::vec_dot(w, x, n); }
void q3_k_avx2::tile(const Tile& t) { K<kq_simd::Q3K>::tile(t); }
float q4_k_avx2::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q4K>::vec_dot(w, x, n); }
void q4_k_avx2::tile(const Tile& t) { K<kq_simd::Q4K>::tile(t); }
float q5_k_avx2::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q5K>::vec_dot(w, x, n); }
void q5_k_avx2::tile(const Tile& t) { K<kq_simd::Q5K>::tile(t); }
float q6_k_avx2::vec_dot(const void* w, const void* x, int64_t n) { return K<kq_simd::Q6K>::vec_dot(w, x, n); }
void q6_k_avx2::tile(const Tile& t) { K<kq_simd::Q6K>::tile(t); }

}  // namespace ns::kernels
