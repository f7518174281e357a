// The DSA lightning indexer's scores (engine/layers/dsa_indexer.h), the part
// of the indexer that grows with the context: for each of n_keys cached F16
// keys j,
//   scores[j] = sum over heads h, in order, of max(q_h . key_j, 0) * w[h]
// in F32 (each term's product rounded, then added: not fused), q_h the F32
// query of head h and w[h] its (prescaled) weight.
//
// The dot product's summation order depends on the path, as the reference's
// ggml_vec_dot_f32 does on each ISA (its fused lightning-indexer op converts
// the F16 key to F32 and calls it once per head):
//   scalar: i in order (the reference loop, kept as the oracle);
//   avx2 / avx512: 4 accumulators of 8 / 16 lanes over blocks of 32 / 64
//     values, each lane summing with FMA; then accumulator 0 + 2 and 1 + 3,
//     their sum, its lanes halved to 4 (lane i + lane i + width/2), then
//     (0 + 2) + (1 + 3) on avx512 (_mm512_reduce_add_ps), (0 + 1) + (2 + 3) on
//     avx2 (two _mm_hadd_ps); the values past the last block added after
//     that, in order, each product rounded. indexer_dot_lanes is that order in portable code
//     (std::fma), and each SIMD path equals it bit for bit.
// Goldens are made with the reference built for AVX-512, so the avx512 path
// is the one whose scores equal the reference's.
//
// Thread-safety: reentrant.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace ns::kernels {

// q: [n_head][head_dim]; w: [n_head]; key j: head_dim halves at keys + j * key_stride.
void indexer_scores(Isa isa, const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                    int64_t key_stride, int64_t n_keys, float* scores);

// ggml_vec_dot_f32's order for SIMD `width` 8 (AVX2) or 16 (AVX-512), above.
float indexer_dot_lanes(const float* a, const float* b, int64_t n, int width);

namespace detail {  // the SIMD paths (indexer_avx2.cpp, indexer_avx512.cpp), through indexer_scores
void indexer_scores_avx2(const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                         int64_t key_stride, int64_t n_keys, float* scores);
void indexer_scores_avx512(const float* q, const float* w, int64_t n_head, int64_t head_dim, const uint16_t* keys,
                           int64_t key_stride, int64_t n_keys, float* scores);
}  // namespace detail

}  // namespace ns::kernels
