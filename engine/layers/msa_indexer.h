// MiniMax sparse attention's block indexer (MiniMax-M3): per layer, which
// blocks of cached positions each query's GQA group attends to.
//
// For a token at position pos with normed input x, one indexer head per KV
// head (group) g:
//   q_g = rope(rms_norm(indexer.q_proj(x)_g) * q_norm)      head_dim each
//   k   = rope(rms_norm(indexer.k_proj(x)) * k_norm)        one key, cached
//   score_g(j) = q_g . k_j                                  over j <= pos
//   block_g(b) = max of score_g(j) over the positions j of block b
//                (positions b * block_size .. b * block_size + block_size - 1)
// The local_blocks blocks ending at pos's own (pos / block_size, and the ones
// before it) are always kept, then the best-scoring others up to top_k blocks
// in all; group g's query heads attend to the positions of its kept blocks
// only. While pos's blocks (pos / block_size + 1) number top_k or fewer every
// position is kept: dense attention. The rope is the attention's (its rope
// dims, NEOX). The key is cached F16 after the layer's K in the attention
// cache row (MsaShape::cache_offset), as the reference's indexer cache holds
// it in the K cache's type. Scores are dot products of the F32 query and the
// key widened from F16 (the reference gathers its cached keys to F32 rows, so
// its score matmul is F32 x F32), summed in ggml_vec_dot_f32's lane order for
// the active ISA (kernels::indexer_dot_lanes; scalar: in order; its batched
// prefill may sum in its GEMM's order, within the goldens' 0.002). The
// forced blocks tie (the reference adds 1e30 to their scores), which only
// matters with local_blocks > top_k: loading refuses it. Other equal block
// scores are settled by std::partial_sort over the visible blocks in order
// (the reference's top_k op sorts its padded block axis the same way; an
// exact tie of two maxima of F32 dot products is not expected).
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

struct MsaShape {
  int64_t n_head = 0, head_dim = 0;  // one indexer head per KV head
  int64_t top_k = 0;                 // blocks kept per query and group
  int64_t block = 0;                 // positions per block
  int64_t local = 0;                 // blocks always kept, ending at the query's own
  int64_t cache_offset = 0;          // where the key starts in a K cache row (after the layer's K)
  float norm_eps = 1e-6f;            // the model's RMS epsilon
  RopeParams rope;                   // the attention's rope
};

// From hp's indexer keys; the key cached at cache_offset. Throws
// ns::Error(bad_model) naming the key for sizes the indexer cannot run.
MsaShape msa_shape(const Hparams& hp, int64_t cache_offset);

struct MsaWeights {
  kernels::MatrixView q_proj;         // [n_head * head_dim][n_embd]
  kernels::MatrixView k_proj;         // [head_dim][n_embd]
  std::vector<float> q_norm, k_norm;  // [head_dim], shared by the heads
};

// The table entries of layer prefix p's indexer ("blk.N.indexer.*"), bound to w.
void msa_tensors(TensorTable& t, const std::string& p, const MsaShape& sh, int64_t n_embd, MsaWeights& w);

// Each (batch token, group)'s choice: keep[t * n_head + g] is null (every
// position 0..pos) or a 0/1 mask over positions 0..pos (gqa_attend's keep).
struct MsaSelection {
  std::vector<uint8_t> masks;        // [t][g][stride]
  std::vector<const uint8_t*> keep;  // [t][g]
  int64_t stride = 0;
};

// Layer il's indexer for the s.n tokens (their normed inputs in s.xn): their
// keys into the cache rows of layer il, then each token's kept positions
// into *out.
void msa_select(const MsaWeights& w, const MsaShape& sh, int64_t il, ForwardState& s, MsaSelection& out);

}  // namespace ns
