// DeepSeek sparse attention's lightning indexer (DeepSeek V3.2, GLM-5): per
// layer, which cached positions each query's MLA heads attend to.
//
// For a token with normed input x and normed low-rank query q_a (MLA's):
//   q_h = hadamard(rope(indexer.attn_q_b(q_a))_h)        n_head heads of head_dim
//   k   = hadamard(rope(layer_norm(indexer.attn_k(x)) * k_norm + k_norm_b))   one key
//   w_h = indexer.proj(x)_h / sqrt(head_dim * n_head)
//   score(j) = sum_h max(q_h . k_j, 0) * w_h             over the cached keys j <= pos
// and the query attends to the top_k positions by score (all of them while
// pos < top_k, where the result is dense MLA). The rope turns the first
// rope_dim values of each head ([rope | nope], as the reference lays them
// out), neox (deepseek32) or adjacent pairs (glm-dsa); hadamard is the
// orthonormal Walsh-Hadamard rotation over blocks of hadamard_block values,
// which leaves the dot products as they are but changes what the F16 cache
// rounds, as the reference stores it. Keys are cached F16 after the latent in
// the MLA cache row (MlaShape::indexer_width); scores are summed in F32 over
// the F32 query and the F16 key, head by head, as the reference's fused
// indexer, by kernels::indexer_scores (engine/kernels/indexer.h: the
// reference's dot-product order on each ISA path). A decode step's keys are
// split over the threads, a batch's tokens. Ties at the top_k-th score are settled as the reference's top_k
// op settles them (std::partial_sort by score alone over the positions in
// order; see the .cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/layers/yarn_rope.h"
#include "engine/spec/hparams.h"
#include "engine/spec/tensor_table.h"

namespace ns {

struct DsaShape {
  int64_t n_head = 0, head_dim = 0, top_k = 0;
  int64_t hadamard_block = 0;  // the largest power of two >= 64 dividing head_dim (the reference's rotation size)
  int64_t cache_offset = 0;    // where the key starts in a cache row (the MLA latent's width)
  float norm_eps = 1e-6f;
  float weight_scale = 0;  // 1 / sqrt(head_dim * n_head)
  RopeParams rope;         // rope_dim dims of each head, the indexer's rope type
};

// From hp's indexer keys; the key cached at cache_offset. Throws
// ns::Error(bad_model) naming the key for sizes the indexer cannot run.
DsaShape dsa_shape(const Hparams& hp, int64_t cache_offset);

struct DsaWeights {
  kernels::MatrixView q_b;              // [n_head * head_dim][q_lora]
  kernels::MatrixView k;                // [head_dim][n_embd]
  std::vector<float> k_norm, k_norm_b;  // [head_dim]
  kernels::MatrixView proj;             // [n_head][n_embd]
};

// The table entries of layer prefix p's indexer ("blk.N.indexer.*"), of
// `presence` (glm-dsa's shared layers have none), bound to w.
void dsa_tensors(TensorTable& t, const std::string& p, const DsaShape& sh, int64_t n_embd, int64_t q_lora,
                 Presence presence, DsaWeights& w);

// Each batch token's choice: keep(t) is null (all positions 0..pos) or a mask
// over positions 0..pos.
struct DsaSelection {
  std::vector<uint8_t> masks;        // [t][stride]
  std::vector<const uint8_t*> keep;  // [t]
  int64_t stride = 0;
};

// Layer il's indexer for the s.n tokens: their keys into the cache rows of
// layer il (after the latent), then each token's top_k positions into *out.
// q_a: [t][q_lora] the normed low-rank queries (mla_project's s.v).
void dsa_select(const DsaWeights& w, const DsaShape& sh, int64_t il, const float* q_a, ForwardState& s,
                DsaSelection& out);

// The orthonormal Walsh-Hadamard rotation of v's n values (n a power of two),
// in place: scaled by 1/sqrt(n) first, then butterflies of span 1, 2, 4, ...
void hadamard_rotate(float* v, int64_t n);

}  // namespace ns
