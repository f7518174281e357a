// Multi-head latent attention (DeepSeek V2/V3, Kimi K2) over a cache of the
// compressed latent only.
//
// Per token the cache holds c = [rms_norm(kv_a(x)[:kv_lora]) | rope(kv_a(x)[kv_lora:])],
// kv_lora_rank + qk_rope values per layer (stored F16). Keys and values are
// never expanded: each head's query is absorbed into latent space through
// k_b (q_lat = k_b_h q_nope_h, so q_lat . c_lat = q_nope_h . k_nope_h), all
// heads attend to the same cached rows (multi-query attention with head size
// kv_lora + rope; the values are the latent part), and each head's attended
// latent is expanded through v_b before the output projection. This is the
// reference's MLA path for files with split attn_k_b/attn_v_b. Files with the
// older fused attn_kv_b run it too, through k_b/v_b views of attn_kv_b.
//
// Long prompt chunks: absorbed, every (query, key) pair costs a latent-wide
// score and value (kv_lora + rope, then kv_lora) per head. A chunk of one
// sequence long enough (mla_expand_run, a multiply-add count) instead expands
// the sequence's keys and values from the cached latents for this pass only
// (k_nope = k_b^T c, v = v_b c, F16 as an expanded cache would hold them) and
// runs plain multi-head attention (k_head, then v_head per pair). The cache
// keeps the latent; decode steps stay absorbed. Not in the reference, which
// absorbs every chunk; the two round differently, within the goldens'
// tolerances (mla_attention.cpp says where the quantized case draws its line).
//
// The reference itself runs fused-attn_kv_b files differently: as plain
// multi-head attention, expanding keys and values with attn_kv_b and caching
// them (n_head * (k_head + v_head) values per token and layer). With
// MlaShape::expanded_cache set, that path is taken instead; it reproduces the
// reference's rounding exactly, which the latent path cannot (it rounds the
// latent rather than the expanded keys and values).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/forward_state.h"
#include "engine/kernels/kernels.h"
#include "engine/layers/yarn_rope.h"
#include "engine/spec/tensor_loader.h"
#include "engine/spec/tensor_table.h"

namespace ns {

struct MlaShape {
  int64_t n_head = 0;
  int64_t q_lora_rank = 0;  // 0: the query is one projection (wq)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0, qk_rope = 0, v_head = 0;
  float kq_scale = 0;     // softmax scale, YaRN's mscale^2 included
  float rms_eps = 1e-6f;  // for the q_a and kv_a norms
  RopeParams rope;
  bool expanded_cache = false;  // fused attn_kv_b run as the reference does (see above)
  bool expand_prefill = false;  // long chunks may expand (mla_expand_run; ArchOptions::mla_expand_prefill)
  // false: the qk_rope parts of queries and keys are used as they are, never
  // rotated (kimi-linear and kimi-k3 MLA layers: their position information
  // comes from the KDA layers between them).
  bool rotary = true;
  // attn_gate as [n_head][n_embd]: one sigmoid per head scales the head's
  // whole output (bailingmoe3), instead of one per output value (kimi-k3).
  bool per_head_gate = false;
  // DeepSeek sparse attention (deepseek32, glm-dsa): each latent cache row
  // carries the lightning indexer's key after the latent, this many values
  // (engine/layers/dsa_indexer.h). 0: none.
  int64_t indexer_width = 0;

  int64_t k_head() const { return qk_nope + qk_rope; }             // query/key head size before absorption
  int64_t latent_width() const { return kv_lora_rank + qk_rope; }  // one cached latent row
  // Per-token, per-layer KV cache widths.
  int64_t cache_k_width() const { return expanded_cache ? n_head * k_head() : latent_width() + indexer_width; }
  int64_t cache_v_width() const {
    return expanded_cache ? n_head * v_head : 0;
  }  // latent: V is the K row's latent part
};

// The shape and scales of a deepseek2 model, from its metadata.
MlaShape mla_shape(const Hparams& hp);

struct MlaWeights {
  kernels::MatrixView wq;          // [n_head * k_head][n_embd] (q_lora_rank == 0)
  kernels::MatrixView wq_a, wq_b;  // [q_lora][n_embd], [n_head * k_head][q_lora]
  std::vector<float> q_a_norm;     // [q_lora]
  kernels::MatrixView wkv_a;       // [kv_lora + rope][n_embd]
  std::vector<float> kv_a_norm;    // [kv_lora]
  ExpertsView k_b;                 // per head [kv_lora rows][qk_nope cols] (latent path)
  ExpertsView v_b;                 // per head [v_head rows][kv_lora cols]
  kernels::MatrixView kv_b;        // fused files: [n_head * (qk_nope + v_head)][kv_lora]
  kernels::MatrixView wo;          // [n_embd][n_head * v_head]
  // The output gate (attn_gate: kimi-k3, bailingmoe3): the attention output is
  // multiplied by sigmoid(gate · x), x the normed layer input, before wo.
  // rows == 0: none.
  kernels::MatrixView gate;              // [n_head * v_head][n_embd], or [n_head][n_embd] (per_head_gate)
  std::unique_ptr<uint8_t[]> k_b_owned;  // k_b transposed out of a fused attn_kv_b (k_b points here; move-only)
};

// Which key/value expansion a file carries: the split attn_k_b + attn_v_b
// (MLA files), the legacy fused attn_kv_b, or either (the loader takes the
// fused one when present; the generator writes the split one).
enum class MlaLayout { split, fused, either };

// The table entries (spec/tensor_table.h) of layer prefix p's ("blk.N.") MLA
// in the converter's order: attn_q_a_norm, attn_q_a, attn_q_b (or attn_q),
// attn_kv_a_norm, attn_kv_a_mqa, the `layout`'s key/value expansion, attn_gate
// of presence `gate` (kimi-k3's output gate), attn_output; bound to w.
void mla_tensors(TensorTable& t, const std::string& p, const MlaShape& sh, int64_t n_embd, MlaLayout layout,
                 Presence gate, MlaWeights& w);
// After loading: a fused attn_kv_b's per-head k_b/v_b views (k_b transposed
// for the latent path). Throws ns::Error(bad_model) naming p when neither
// layout was in the file.
void finish_mla(MlaWeights& w, const MlaShape& sh, const std::string& p);

// Per-token widths of the ForwardState buffers mla_attention uses (see the .cpp).
int64_t mla_q_width(const MlaShape& sh);
int64_t mla_k_width(const MlaShape& sh);
int64_t mla_v_width(const MlaShape& sh);
int64_t mla_att_width(const MlaShape& sh);
// The buffers of a stack of MLA layers whose FFN is ff wide (deepseek2, deepseek32):
// the widths above, and the cache row sh keeps (the latent path: the values are the latent).
BufferSizes mla_buffer_sizes(const MlaShape& sh, int64_t ff);

// Whether `queries` consecutive tokens of one sequence, the last seeing `keys`
// keys (itself included), attend as plain multi-head attention over keys and
// values expanded from the cached latents for this pass (k_nope = k_b^T c,
// v = v_b c) rather than absorbed: on a long prompt chunk that costs fewer
// multiply-adds, since each (query, key) pair then costs k_head + v_head
// instead of latent_width + kv_lora, for kv_lora * (qk_nope + v_head) per key
// once. Only with expand_prefill (off by default: the path then depends on
// the chunk's length, so a position's logits on what follows it, by float
// order); never for one query (decode), nor with expanded_cache, nor for fewer
// than 256 queries when k_b or v_b is block-quantized (they round differently
// from the absorbed path, which is the reference's; see the .cpp). The cache
// stays latent either way.
bool mla_expand_run(const MlaShape& sh, const MlaWeights& w, int64_t queries, int64_t keys);

// The scratch of expanded chunks (ForwardState's xp_ buffers) for sequences
// of up to `keys` tokens in forward passes of up to `queries`, over layers
// with these weights; allocated into *s when s is not null; returns its bytes.
// With L the longest sequence at which a chunk of at most `queries` expands
// in any layer (mla_expand_run; 0: none, nothing is allocated), B the key
// block min(L, 1024) and g heads per group (as many as fit 64 MiB at L, at
// least 1):
//   g * L * (k_head + v_head) * 2          F16 keys and values of g heads
//   + B * kv_lora * 4                      F32 latents of one key block
//   + max(g * B, n_head * min(L, 256)) * (nope + v_head) * 4   their F32 expansions
//     (a shorter run takes more heads at once, in blocks of at least 256 keys)
//   + n_head * nope * kv_lora * 4 (2 for F16/BF16 k_b)   k_b transposed (split files)
// On V2-Lite (16 heads, kv_lora 512, nope 128, v_head 128, Q4_0 k_b) that is
// 640 B per key and head: 6 heads at 16K keys (60 MiB), 1 head at 128K
// (80 MiB, 2 % of that sequence's 3.8 GiB latent cache over 27 layers), plus
// 10-12 MiB. A run longer than the scratch holds (never, when the plan's L is
// the longest sequence) stays absorbed.
uint64_t mla_context_scratch(const MlaShape& sh, const std::vector<const MlaWeights*>& layers, int64_t keys,
                             int64_t queries, ForwardState* s);

// s.xn -> s.out for s.n tokens at (s.seq[t], s.pos[t]), appending to layer il of
// the cache (widths sh.cache_k_width() / sh.cache_v_width()).
void mla_attention(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s);

// mla_attention in its two steps, for DeepSeek sparse attention to choose the
// positions in between: the projections (after which s.v holds each token's
// normed low-rank query, [t][q_lora]) ...
void mla_project(const MlaWeights& w, const MlaShape& sh, ForwardState& s);
// ... then the attention, token t's heads over the cached positions j with
// keep[t][j] != 0 only (keep[t] null: all of them; keep null: all, for every
// token). A selection runs the absorbed latent path, never expanded (nor with
// expanded_cache, which DeepSeek sparse attention files never have).
void mla_attend(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s, const uint8_t* const* keep);

}  // namespace ns
