// The lightning indexer's score of cached F16 keys (deepseek4's compressed
// blocks), summed as the reference's fused op (ggml's lightning_indexer on
// the CPU) sums it:
//   score_j = sum_h max(q_h . k_j, 0) * w_h
// h in order, each product and each sum rounded on its own (no fused
// multiply-add there), with q_h . k_j (the F32 query, the key widened from
// F16) in ggml_vec_dot_f32's order for the CPU the reference was built for:
// four accumulators of `width` lanes (8 on AVX2, 16 on AVX-512) with fused
// multiply-adds, element i in accumulator (i / width) mod 4 lane i mod width,
// then accumulators 0 + 2 and 1 + 3, their sum, and the lanes' horizontal sum
// (_mm256 pairs: (l + l4) then hadd twice; _mm512_reduce_add_ps: l + l8, then
// l + l4, then (r0 + r2) + (r1 + r3)). The width follows kernels::active_isa,
// as the attention's lanes do (engine/layers/attention.h).
//
// indexer_scores_reference is the order written out lane by lane (the scalar
// reference; std::fma for the fused steps); the AVX2 and AVX-512 paths give
// its bits exactly (tests/unit/engine/indexer_score_test.cpp): a fused
// multiply-add rounds once in both, the additions are the same in the same
// order, and the head sum is done outside the vector code so that no compiler
// contracts it.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace ns {

// out[j] = score of key j for j < n: key j is dim F16 values at k + j * k_stride; q[n_head][dim], w[n_head]
// (the weights already scaled). dim a multiple of 64 (the reference's indexer sizes; throws std::invalid_argument
// otherwise). Under isa (clamped to what the CPU has), with the lane width of `width` (8 or 16).
void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k, int64_t k_stride,
                    int64_t n, float* out, kernels::Isa isa, int width);
// The same with the CPU's active ISA and its width (16 on AVX-512, else 8).
void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k, int64_t k_stride,
                    int64_t n, float* out);
// The scalar reference of the order above for `width` 8 or 16.
void indexer_scores_reference(const float* q, const float* w, int64_t n_head, int64_t dim, const uint16_t* k,
                              int64_t k_stride, int64_t n, float* out, int width);

}  // namespace ns
