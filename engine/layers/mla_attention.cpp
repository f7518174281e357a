#include "engine/layers/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/state/sequence_state.h"
#include "engine/layers/attention.h"
#include "engine/state/ops.h"
#include "engine/state/trace.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"

// Buffer use (per-token widths from mla_*_width, rows of s.n tokens):
//   s.att  [t][n_head * k_head]         the query projection (nope | rope per head),
//          then [t][n_head * v_head]    the expanded attention output, input of wo (latent path)
//   s.v    [t][q_lora]                  the low-rank query (q_a), then
//          [t][n_head * kv_lora]        each head's attended latent (latent path), or
//          [t][n_head * (nope + v)]     attn_kv_b's expansion (expanded path), then
//          [t][n_head * v_head]         the output gate's logits (expanded path, attn_gate)
//   s.q    [t][n_head * latent_width]   absorbed queries [q_lat | q_pe] per head (latent path), then
//          [t][n_head * v_head]         the output gate's logits (latent path, attn_gate), or
//          [t][kv_lora] the latents for attn_kv_b, then [t][n_head * v_head] the attention output (expanded path)
//   s.k    [t][latent_width]            this batch's latents [normed latent | roped k_pe]
//   s.q16  per thread: one F16 query, or one activation row converted for a per-head product
namespace ns {
namespace {

// What expanding a key costs per multiply-add, against one multiply-add of
// attention (mla_expand_run): measured, see docs/performance.md ("MLA prefill").
constexpr double kExpandCost = 1.0;

// With block-quantized k_b or v_b the two paths round differently: the
// absorbed one (the reference's) rounds each query to 8 bits before k_b and
// each head's attended latent before v_b; the expanded one rounds each key's
// latent before v_b and uses k_b exactly. On the tiny random golden models
// that moves logits past the goldens' budgets (kimi-linear-q8_0: mean
// |dlogit| 0.012 against 0.01; flipped greedy choices in kimi-k3-mxfp4,
// kimi-linear-lowtypes and ds2-k2-iq2xxs) when their
// prompts (10-192 tokens) run expanded, while the F32 twins stay within
// 7e-4 of 0.002. So with quantized k_b/v_b only chunks this long expand,
// where the saving is largest (docs/performance.md, "MLA prefill").
constexpr int64_t kExpandMinQuantized = 256;

bool is_block_type(gguf::GgmlType t) {
  return t != gguf::GgmlType::F32 && t != gguf::GgmlType::F16 && t != gguf::GgmlType::BF16;
}

[[noreturn]] void bad_shape(const std::string& what) {
  throw Error(ErrorKind::bad_model, "deepseek2 attention: " + what);
}

// Each thread's share of s.q16, in uint16s, a multiple of 64 bytes so the
// block formats' float scales stay aligned.
size_t thread_slot(const ForwardState& s) { return (s.q16.size() / static_cast<size_t>(s.pool->size())) & ~size_t{31}; }

// y[t*y_ts + h*y_hs + r] = W_h[r] . x[t*x_ts + h*x_hs ..] for every head h
// and each token t of `tokens`: each head's small matrix applied to its slice
// of those tokens, heads spread over the threads (one pool dispatch, not one
// per head). The activations are converted to the weights' vec-dot type as
// matmul would.
void per_head_product(const ExpertsView& w, const float* x, int64_t x_ts, int64_t x_hs, float* y, int64_t y_ts,
                      int64_t y_hs, const std::vector<int64_t>& tokens, ForwardState& s) {
  if (tokens.empty()) return;
  const kernels::Isa isa = kernels::active_isa();
  const size_t slot = thread_slot(s);
  s.pool->parallel_for(w.n_expert, [&](int thread, int64_t h0, int64_t h1) {
    auto* xa = reinterpret_cast<uint8_t*>(&s.q16[static_cast<size_t>(thread) * slot]);
    for (int64_t h = h0; h < h1; ++h) {
      const kernels::MatrixView wh = w.expert(h);
      const auto* rows = static_cast<const uint8_t*>(wh.data);
      for (const int64_t t : tokens) {
        kernels::convert_activations(w.type, isa, x + t * x_ts + h * x_hs, xa, w.cols);
        float* out = y + t * y_ts + h * y_hs;
        kernels::rows_dot(w.type, isa, rows, wh.row_stride, w.rows, xa, w.cols, out);
      }
    }
  });
}

// The type a transposed copy of `t` weights is kept in: F16/BF16/F32 keep
// theirs (the transposition is exact), block-quantized types become F32.
gguf::GgmlType transposed_type(gguf::GgmlType t) {
  using gguf::GgmlType;
  return t == GgmlType::F16 || t == GgmlType::BF16 ? t : GgmlType::F32;
}

// dst[c][r] = src[r][c] for a [rows][cols] matrix of `type` (rows row_stride
// apart) into a dense [cols][rows] one of transposed_type(type).
void transpose_rows(gguf::GgmlType type, const uint8_t* src, size_t row_stride, int64_t rows, int64_t cols,
                    uint8_t* dst) {
  using gguf::GgmlType;
  const GgmlType out = transposed_type(type);
  const size_t elem = out == GgmlType::F32 ? 4 : 2;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(type, src + static_cast<size_t>(r) * row_stride, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      uint8_t* o = dst + static_cast<size_t>(c * rows + r) * elem;
      if (out == GgmlType::F32) {
        std::memcpy(o, &row[static_cast<size_t>(c)], 4);
      } else {
        const float v = row[static_cast<size_t>(c)];
        const uint16_t h = out == GgmlType::F16 ? kernels::fp32_to_fp16(v) : kernels::fp32_to_bf16(v);
        std::memcpy(o, &h, 2);
      }
    }
  }
}

size_t element_bytes(gguf::GgmlType t) { return t == gguf::GgmlType::F32 ? 4 : 2; }

// The k part of a fused attn_kv_b ([n_head * (nope + v_head)] rows of kv_lora)
// transposed to per-head [kv_lora][nope] matrices (in transposed_type).
void transpose_k_b(const kernels::MatrixView& kv_b, const MlaShape& sh, MlaWeights& w) {
  const gguf::GgmlType type = transposed_type(kv_b.type);
  const size_t elem = element_bytes(type);
  const int64_t kv_lora = sh.kv_lora_rank, nope = sh.qk_nope, per_head = sh.qk_nope + sh.v_head;
  const size_t head_bytes = static_cast<size_t>(kv_lora * nope) * elem;
  w.k_b_owned = std::make_unique<uint8_t[]>(head_bytes * static_cast<size_t>(sh.n_head));
  for (int64_t h = 0; h < sh.n_head; ++h)
    transpose_rows(kv_b.type,
                   static_cast<const uint8_t*>(kv_b.data) + static_cast<size_t>(h * per_head) * kv_b.row_stride,
                   kv_b.row_stride, nope, kv_lora, w.k_b_owned.get() + static_cast<size_t>(h) * head_bytes);
  w.k_b.type = type;
  w.k_b.data = w.k_b_owned.get();
  w.k_b.n_expert = sh.n_head;
  w.k_b.rows = kv_lora;
  w.k_b.cols = nope;
  w.k_b.row_stride = static_cast<size_t>(nope) * elem;
  w.k_b.expert_stride = head_bytes;
}

}  // namespace

MlaShape mla_shape(const Hparams& hp) {
  MlaShape sh;
  sh.n_head = hp.n_head;
  sh.q_lora_rank = hp.q_lora_rank;
  sh.kv_lora_rank = hp.kv_lora_rank;
  // MLA files describe the MQA view in key_length/value_length and the real
  // head sizes in the *_mla keys; older files have the head sizes directly.
  const int64_t k_head = hp.is_mla() ? hp.head_dim_k_mla : hp.head_dim;
  sh.v_head = hp.is_mla() ? hp.head_dim_v_mla : hp.head_dim_v;
  sh.qk_rope = hp.rope_dim;
  sh.qk_nope = k_head - sh.qk_rope;
  if (sh.kv_lora_rank <= 0) bad_shape("attention.kv_lora_rank is missing or 0");
  if (sh.qk_nope <= 0)
    bad_shape("the key head size " + std::to_string(k_head) + " leaves no room beside " + std::to_string(sh.qk_rope) +
              " rope dims (rope.dimension_count, attention.key_length[_mla])");
  if (hp.is_mla() && hp.head_dim != sh.kv_lora_rank + sh.qk_rope)
    bad_shape("attention.key_length " + std::to_string(hp.head_dim) +
              " should be kv_lora_rank + rope dims = " + std::to_string(sh.kv_lora_rank + sh.qk_rope));
  sh.rms_eps = hp.rms_eps;
  sh.rope = rope_params(hp);
  // deepseek2 (YarnMscale::mscale_all_dim, its traits), as the reference: undo
  // the rope's YaRN magnitude correction to get the original attn_factor, then
  // scale the softmax by mscale^2 with mscale = 1 + 0.1 * mscale_all_dim *
  // ln(factor). The kimi hybrids' MLA (reference kimi-linear.cpp) scales by
  // 1/sqrt(key length) alone, YaRN or not.
  const float sqrt_k = std::sqrt(static_cast<float>(k_head));
  sh.kq_scale = 1.0f / sqrt_k;
  if (hp.yarn_mscale == YarnMscale::mscale_all_dim) {
    const float ln_factor = std::log(1.0f / sh.rope.freq_scale);
    const float attn_factor_org = sh.rope.attn_factor * (1.0f + 0.1f * ln_factor);
    const float mscale = attn_factor_org * (1.0f + 0.1f * (hp.yarn_log_mul / 0.1f) * ln_factor);
    sh.kq_scale = mscale * mscale / sqrt_k;
  }
  return sh;
}

void mla_tensors(TensorTable& t, const std::string& p, const MlaShape& sh, int64_t n_embd, MlaLayout layout,
                 Presence gate, MlaWeights& w) {
  using R = TensorRole;
  const int64_t q_rows = sh.n_head * sh.k_head(), v_rows = sh.n_head * sh.v_head;
  if (sh.q_lora_rank > 0) {
    t.vector(p + "attn_q_a_norm.weight", sh.q_lora_rank, R::norm, &w.q_a_norm);
    t.matrix(p + "attn_q_a.weight", sh.q_lora_rank, n_embd, R::input, &w.wq_a);
    t.matrix(p + "attn_q_b.weight", q_rows, sh.q_lora_rank, R::input, &w.wq_b);
  } else {
    t.matrix(p + "attn_q.weight", q_rows, n_embd, R::input, &w.wq);
  }
  t.vector(p + "attn_kv_a_norm.weight", sh.kv_lora_rank, R::norm, &w.kv_a_norm);
  t.matrix(p + "attn_kv_a_mqa.weight", sh.latent_width(), n_embd, R::input, &w.wkv_a);
  if (layout != MlaLayout::split)
    t.matrix(p + "attn_kv_b.weight", sh.n_head * (sh.qk_nope + sh.v_head), sh.kv_lora_rank, R::input, &w.kv_b,
             layout == MlaLayout::fused ? Presence::required : Presence::tolerated)
        .by_rows = true;  // its per-head k_b/v_b views slice it by rows (finish_mla)
  if (layout != MlaLayout::fused) {
    const Presence split = layout == MlaLayout::split ? Presence::required : Presence::optional;
    t.heads(p + "attn_k_b.weight", sh.n_head, sh.kv_lora_rank, sh.qk_nope, &w.k_b, split);
    t.heads(p + "attn_v_b.weight", sh.n_head, sh.v_head, sh.kv_lora_rank, &w.v_b, split);
  }
  t.matrix(p + "attn_gate.weight", sh.per_head_gate ? sh.n_head : v_rows, n_embd, R::input, &w.gate, gate);
  t.matrix(p + "attn_output.weight", n_embd, v_rows, R::residual, &w.wo);
}

void finish_mla(MlaWeights& w, const MlaShape& sh, const std::string& p) {
  if (w.kv_b.data == nullptr) {
    if (w.k_b.data == nullptr || w.v_b.data == nullptr)
      throw Error(ErrorKind::bad_model, "tensor '" + p + (w.k_b.data ? "attn_v_b" : "attn_k_b") +
                                            ".weight' is missing (nor is there a fused '" + p + "attn_kv_b.weight')");
    return;
  }
  // Fused layout: per head, qk_nope rows of k_b^T then v_head rows of v_b.
  const kernels::MatrixView& kv_b = w.kv_b;
  if (!sh.expanded_cache) transpose_k_b(kv_b, sh, w);
  w.v_b.type = kv_b.type;
  w.v_b.data = static_cast<const uint8_t*>(kv_b.data) + static_cast<size_t>(sh.qk_nope) * kv_b.row_stride;
  w.v_b.n_expert = sh.n_head;
  w.v_b.rows = sh.v_head;
  w.v_b.cols = sh.kv_lora_rank;
  w.v_b.row_stride = kv_b.row_stride;
  w.v_b.expert_stride = static_cast<size_t>(sh.qk_nope + sh.v_head) * kv_b.row_stride;
}

int64_t mla_q_width(const MlaShape& sh) {
  // n_head * v_head: the expanded path's output, or the latent path's gate logits.
  return std::max(sh.n_head * sh.v_head, sh.expanded_cache ? sh.kv_lora_rank : sh.n_head * sh.latent_width());
}
int64_t mla_k_width(const MlaShape& sh) {
  // Also sizes each thread's s.q16 slot: one F16 query head, or an activation
  // row of up to max(nope, kv_lora) values in its vec-dot format (at most 4
  // bytes a value, two uint16s).
  return std::max({sh.latent_width(), sh.k_head(), 2 * std::max(sh.qk_nope, sh.kv_lora_rank)}) + 64;
}
int64_t mla_v_width(const MlaShape& sh) {
  return std::max(sh.q_lora_rank, sh.n_head * (sh.expanded_cache ? sh.qk_nope + sh.v_head : sh.kv_lora_rank));
}
int64_t mla_att_width(const MlaShape& sh) { return sh.n_head * std::max(sh.k_head(), sh.v_head); }

BufferSizes mla_buffer_sizes(const MlaShape& sh, int64_t ff) {
  BufferSizes b;
  b.q = mla_q_width(sh);
  b.k = mla_k_width(sh);
  b.v = mla_v_width(sh);
  b.att = mla_att_width(sh);
  b.ff = ff;
  b.cache.k_dim = sh.cache_k_width();  // the latent and the rotated key part (and DSA's indexer key), or expanded K
  b.cache.v_dim = sh.cache_v_width();  // the latent path: 0, the values are the latent
  return b;
}

namespace {

// att[t][n_head * v_head] *= sigmoid(gate · s.xn[t]) when the layer has an
// output gate (per head: each head's v_head values by its one sigmoid);
// logits is [n][gate rows] scratch.
void apply_output_gate(const MlaWeights& w, const MlaShape& sh, float* att, float* logits, ForwardState& s) {
  if (w.gate.rows == 0) return;
  kernels::matmul(w.gate, s.xn.data(), s.n, logits, *s.pool, s.mm);
  const int64_t n = s.n * w.gate.rows;
  const int64_t per = sh.per_head_gate ? sh.v_head : 1;  // values each logit scales
  for (int64_t i = 0; i < n; ++i) {
    const float g = 1.0f / (1.0f + std::exp(-logits[i]));
    for (int64_t j = 0; j < per; ++j) att[i * per + j] *= g;
  }
}

// Queries into s.att (RoPE applied to each head's rope part) and this batch's
// latents into s.k: [rms_norm(latent) | rope(k_pe)].
void project(const MlaWeights& w, const MlaShape& sh, ForwardState& s) {
  const int64_t n = s.n, kv_lora = sh.kv_lora_rank, lw = sh.latent_width(), q_width = sh.n_head * sh.k_head();
  if (sh.q_lora_rank > 0) {
    float* q_a = s.v.data();
    kernels::matmul(w.wq_a, s.xn.data(), n, q_a, *s.pool, s.mm);
    for (int64_t t = 0; t < n; ++t) {
      float* row = q_a + t * sh.q_lora_rank;
      ops::rms_norm(row, w.q_a_norm.data(), sh.q_lora_rank, sh.rms_eps, row);
    }
    kernels::matmul(w.wq_b, q_a, n, s.att.data(), *s.pool, s.mm);
  } else {
    kernels::matmul(w.wq, s.xn.data(), n, s.att.data(), *s.pool, s.mm);
  }
  kernels::matmul(w.wkv_a, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = s.pos[t];
    float* c = &s.k[t * lw];
    ops::rms_norm(c, w.kv_a_norm.data(), kv_lora, sh.rms_eps, c);
    if (!sh.rotary) continue;
    apply_rope(c + kv_lora, 1, sh.qk_rope, pos, sh.rope);
    apply_rope(&s.att[t * q_width + sh.qk_nope], sh.n_head, sh.k_head(), pos, sh.rope);
  }
}

// Calls f(thread, i) for every attention unit i in [0, n) (units are
// head-major: i = head * tokens + token), handed out in small chunks to
// whichever thread is free: a unit's cost grows with its token's position, so
// fixed contiguous shares would leave the early tokens' thread idle, and on a
// shared machine a paused thread holds up only its current chunk.
template <class F>
void for_attention_units(int64_t n, ForwardState& s, F&& f) {
  constexpr int64_t kUnitsPerChunk = 4;
  s.pool->parallel_chunks((n + kUnitsPerChunk - 1) / kUnitsPerChunk, [&](int thread, int64_t c) {
    for (int64_t i = c * kUnitsPerChunk; i < std::min(n, (c + 1) * kUnitsPerChunk); ++i) f(thread, i);
  });
}

// Expanded keys and values held at once stay under this when one head's fit
// (heads are expanded in groups), so a long context costs time, not a full
// copy per head; the latents and their F32 expansions go a key block at a time.
constexpr int64_t kExpandScratchBytes = int64_t{64} << 20;
constexpr int64_t kExpandKeyBlock = 1024;
// Shorter runs take more heads at once in blocks down to this many keys (the
// F32 buffers hold all heads' at this length), so a plan sized for a long
// context does not split a short run into many small groups.
constexpr int64_t kExpandMinBlock = 256;

// Heads expand_run takes at once for `keys` keys in s's xp_ buffers: as many
// as they hold at that length (at least the plan's group), 0 when they do not
// hold one (the run then stays absorbed).
int64_t expand_group(const MlaShape& sh, const MlaWeights& w, int64_t keys, const ForwardState& s) {
  const int64_t kb = std::min(keys, kExpandMinBlock), kh = sh.k_head(), vh = sh.v_head;
  const bool split = w.kv_b.rows == 0;
  const size_t k_b_t =
      split ? static_cast<size_t>(sh.n_head * sh.qk_nope * sh.kv_lora_rank) * element_bytes(transposed_type(w.k_b.type))
            : 0;
  if (s.xp_latents.size() < static_cast<size_t>(kb * sh.kv_lora_rank) || s.xp_k_b_t.size() < k_b_t ||
      s.xp_tasks.size() < static_cast<size_t>(2 * sh.n_head))
    return 0;
  const auto fit = [](size_t have, int64_t per_head) {
    return static_cast<int64_t>(have / static_cast<size_t>(per_head));
  };
  return std::min({sh.n_head, fit(s.xp_k16.size(), keys * kh), fit(s.xp_v16.size(), keys * vh),
                   fit(s.xp_kf.size(), kb * sh.qk_nope), fit(s.xp_vf.size(), kb * vh)});
}

// k_b transposed into s.xp_k_b_t for the expanded runs of a split file (fused
// files hold k_b^T as attn_kv_b's first nope rows of each head): once per
// layer and forward pass, whatever the number of runs and head groups.
void transpose_k_b_scratch(const MlaWeights& w, const MlaShape& sh, ForwardState& s) {
  if (w.kv_b.rows > 0) return;
  const size_t kt_head = static_cast<size_t>(sh.qk_nope * sh.kv_lora_rank) * element_bytes(transposed_type(w.k_b.type));
  for (int64_t h = 0; h < sh.n_head; ++h)
    transpose_rows(w.k_b.type, w.k_b.data + static_cast<size_t>(h) * w.k_b.expert_stride, w.k_b.row_stride,
                   sh.kv_lora_rank, sh.qk_nope, s.xp_k_b_t.data() + static_cast<size_t>(h) * kt_head);
}

// The tokens t0..t0+n-1 of s, one sequence's consecutive positions, attend as
// plain multi-head attention: every key and value of the sequence up to the
// last one is expanded from the cached latent (k_nope = k_b^T c, v = v_b c,
// rounded to F16 as a cache of expanded rows would be; the key's rope part is
// the cached one), then each head's query (nope | rope, not absorbed) attends
// over its own keys. Output: out[t][n_head * v_head] at row stride out_ts,
// already through v_b. Heads go `group` at a time (expand_group), keys a
// block at a time through the F32 buffers: the same bits as one product over
// all keys, since blocks start at multiples of 64 tokens, where matmul's
// token tiles start too.
void expand_run(const MlaWeights& w, const MlaShape& sh, int64_t il, int64_t t0, int64_t n, int64_t group, float* out,
                int64_t out_ts, ForwardState& s) {
  const int64_t n_head = sh.n_head, kv_lora = sh.kv_lora_rank, nope = sh.qk_nope, kh = sh.k_head(), vh = sh.v_head;
  const int64_t q_width = n_head * kh, seq = s.seq[t0], keys = s.pos[t0 + n - 1] + 1;
  // Key blocks as long as the F32 buffers hold for `group` heads (at least
  // kExpandMinBlock or the run's keys: expand_group), a multiple of 64 keys.
  int64_t kb = std::min({keys, kExpandKeyBlock, static_cast<int64_t>(s.xp_latents.size()) / kv_lora,
                         static_cast<int64_t>(s.xp_kf.size()) / (group * nope),
                         static_cast<int64_t>(s.xp_vf.size()) / (group * vh)});
  if (kb < keys) kb = kb / 64 * 64;
  SequenceState& kv = *s.seqs;
  const int64_t lw = kv.k_dim();
  const uint16_t* rows = kv.k(il, seq, 0);
  const bool fused = w.kv_b.rows > 0;
  const gguf::GgmlType kt_type = transposed_type(w.k_b.type);
  const size_t kt_head = static_cast<size_t>(nope * kv_lora) * element_bytes(kt_type);
  const auto k_view = [&](int64_t h) -> kernels::MatrixView {
    if (fused)
      return {w.kv_b.type,
              static_cast<const uint8_t*>(w.kv_b.data) + static_cast<size_t>(h * (nope + vh)) * w.kv_b.row_stride, nope,
              kv_lora, w.kv_b.row_stride};
    return {kt_type, &s.xp_k_b_t[static_cast<size_t>(h) * kt_head], nope, kv_lora, kt_head / static_cast<size_t>(nope)};
  };
  float* c = s.xp_latents.data();
  float* kf = s.xp_kf.data();
  float* vf = s.xp_vf.data();
  uint16_t* k16 = s.xp_k16.data();
  uint16_t* v16 = s.xp_v16.data();
  kernels::MatmulTask* tasks = s.xp_tasks.data();
  const size_t slot = thread_slot(s);
  for (int64_t h0 = 0; h0 < n_head; h0 += group) {
    const int64_t g = std::min(group, n_head - h0);
    for (int64_t j0 = 0; j0 < keys; j0 += kb) {
      const int64_t m = std::min(kb, keys - j0);
      for (int64_t j = 0; j < m; ++j)
        kernels::dequantize_row(gguf::GgmlType::F16, rows + (j0 + j) * lw, c + j * kv_lora, kv_lora);
      for (int64_t i = 0; i < g; ++i) {
        tasks[2 * i] = {k_view(h0 + i), c, m, kf + i * m * nope};
        tasks[2 * i + 1] = {w.v_b.expert(h0 + i), c, m, vf + i * m * vh};
      }
      kernels::matmul_group(tasks, static_cast<size_t>(2 * g), *s.pool, s.mm);
      s.pool->parallel_for(g * m, [&](int, int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {  // r = head in group * m + key in block
          const int64_t hg = r / m, j = j0 + r % m;
          uint16_t* k = k16 + (hg * keys + j) * kh;
          kernels::quantize_row(gguf::GgmlType::F16, kf + r * nope, k, nope);
          std::memcpy(k + nope, rows + j * lw + kv_lora, sizeof(uint16_t) * static_cast<size_t>(sh.qk_rope));
          kernels::quantize_row(gguf::GgmlType::F16, vf + r * vh, v16 + (hg * keys + j) * vh, vh);
        }
      });
    }
    for_attention_units(g * n, s, [&](int thread, int64_t i) {
      uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
      const int64_t hg = i / n, t = t0 + i % n, h = h0 + hg;
      kernels::quantize_row(gguf::GgmlType::F16, &s.att[t * q_width + h * kh], q16, kh);
      attend_one_head(q16, k16 + hg * keys * kh, kh, v16 + hg * keys * vh, vh, kh, vh, s.pos[t], sh.kq_scale,
                      &out[t * out_ts + h * vh]);
    });
  }
}

// The latent path: cache the latents; runs of one sequence's consecutive
// tokens long enough to pay for expanding their keys (mla_expand_run) attend
// through expand_run; the others absorb k_b into their queries, attend once
// per head over the shared latent rows, and expand through v_b.
void attend_latent(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s, const uint8_t* const* keep) {
  const int64_t n = s.n, n_head = sh.n_head, kv_lora = sh.kv_lora_rank, lw = sh.latent_width();
  const int64_t q_width = n_head * sh.k_head(), v_width = n_head * sh.v_head;
  SequenceState& kv = *s.seqs;
  for (int64_t t = 0; t < n; ++t)
    kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * lw], kv.k(il, s.seq[t], s.pos[t]), lw);

  // Split the batch into runs; each expanded run's output goes to its tokens'
  // rows of s.q (n_head * lw wide, unused by the absorbed path for them) until
  // the absorbed tokens have read their queries out of s.att.
  // The lists are the calling thread's (kept warm); the pool's threads reach
  // them through these references, never through their own thread_locals.
  thread_local std::vector<int64_t> absorbed_rows, expanded_rows;
  std::vector<int64_t>& absorbed = absorbed_rows;
  std::vector<int64_t>& expanded = expanded_rows;
  absorbed.clear();
  expanded.clear();
  for (int64_t t0 = 0, t1; t0 < n; t0 = t1) {
    for (t1 = t0 + 1; t1 < n && s.seq[t1] == s.seq[t0] && s.pos[t1] == s.pos[t1 - 1] + 1;) ++t1;
    const int64_t keys = s.pos[t1 - 1] + 1;
    const bool expand = keep == nullptr && mla_expand_run(sh, w, t1 - t0, keys) && expand_group(sh, w, keys, s) > 0;
    auto& to = expand ? expanded : absorbed;
    for (int64_t t = t0; t < t1; ++t) to.push_back(t);
  }
  if (!expanded.empty()) transpose_k_b_scratch(w, sh, s);
  s.mla_expanded += expanded.size();
  for (size_t i = 0; i < expanded.size();) {
    size_t j = i + 1;
    while (j < expanded.size() && expanded[j] == expanded[j - 1] + 1 && s.seq[expanded[j]] == s.seq[expanded[i]]) ++j;
    const int64_t t0 = expanded[i], run = static_cast<int64_t>(j - i);
    expand_run(w, sh, il, t0, run, expand_group(sh, w, s.pos[t0 + run - 1] + 1, s), s.q.data(), n_head * lw, s);
    i = j;
  }

  if (!absorbed.empty()) {
    // q_lat_h = k_b_h q_nope_h; q_pe rides along.
    per_head_product(w.k_b, s.att.data(), q_width, sh.k_head(), s.q.data(), n_head * lw, lw, absorbed, s);
    for (const int64_t t : absorbed)
      for (int64_t h = 0; h < n_head; ++h)
        std::memcpy(&s.q[(t * n_head + h) * lw + kv_lora], &s.att[t * q_width + h * sh.k_head() + sh.qk_nope],
                    sizeof(float) * static_cast<size_t>(sh.qk_rope));

    float* latent_out = s.v.data();
    const size_t slot = thread_slot(s);
    const int64_t m = static_cast<int64_t>(absorbed.size());
    for_attention_units(m * n_head, s, [&](int thread, int64_t i) {
      uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
      const int64_t t = absorbed[static_cast<size_t>(i % m)], h = i / m, qi = t * n_head + h;
      kernels::quantize_row(gguf::GgmlType::F16, &s.q[qi * lw], q16, lw);
      AttendSpan span;
      if (keep) span.keep = keep[t];
      const int64_t row = kv.k_dim();  // the latent, then the indexer's key when there is one
      attend_one_head(q16, kv.k(il, s.seq[t], 0), row, kv.k(il, s.seq[t], 0), row, lw, kv_lora, s.pos[t], sh.kq_scale,
                      &latent_out[qi * kv_lora], span);
    });
    if (static_cast<int64_t>(absorbed.size()) == n) trace(s, "kqv", il, latent_out, n_head * kv_lora);
    per_head_product(w.v_b, latent_out, n_head * kv_lora, kv_lora, s.att.data(), v_width, sh.v_head, absorbed, s);
  }
  for (const int64_t t : expanded)
    std::memcpy(&s.att[t * v_width], &s.q[t * n_head * lw], sizeof(float) * static_cast<size_t>(v_width));
  apply_output_gate(w, sh, s.att.data(), s.q.data(), s);
  trace(s, "kqv_out", il, s.att.data(), v_width);
  kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
}

// The reference's path for fused attn_kv_b files: expand keys and values with
// one attn_kv_b matmul, cache them in F16, plain multi-head attention.
void attend_expanded(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s) {
  const int64_t n = s.n, n_head = sh.n_head, kv_lora = sh.kv_lora_rank, lw = sh.latent_width();
  const int64_t kh = sh.k_head(), vh = sh.v_head, kd = n_head * kh, vd = n_head * vh, per_head = sh.qk_nope + vh;
  SequenceState& kv = *s.seqs;
  float* expanded = s.v.data();    // [t][n_head * (nope + v)]
  for (int64_t t = 0; t < n; ++t)  // the latents, contiguous for the matmul
    std::memcpy(&s.q[t * kv_lora], &s.k[t * lw], sizeof(float) * static_cast<size_t>(kv_lora));
  kernels::matmul(w.kv_b, s.q.data(), n, expanded, *s.pool, s.mm);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = s.pos[t], seq = s.seq[t];
    for (int64_t h = 0; h < n_head; ++h) {
      const float* e = &expanded[t * n_head * per_head + h * per_head];
      uint16_t* k = kv.k(il, seq, pos) + h * kh;
      kernels::quantize_row(gguf::GgmlType::F16, e, k, sh.qk_nope);
      kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * lw + kv_lora], k + sh.qk_nope, sh.qk_rope);
      kernels::quantize_row(gguf::GgmlType::F16, e + sh.qk_nope, kv.v(il, seq, pos) + h * vh, vh);
    }
  }
  float* att_out = s.q.data();  // [t][n_head * v_head]
  const size_t slot = thread_slot(s);
  s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
    uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_head, h = i % n_head;
      kernels::quantize_row(gguf::GgmlType::F16, &s.att[t * kd + h * kh], q16, kh);
      attend_one_head(q16, kv.k(il, s.seq[t], 0) + h * kh, kd, kv.v(il, s.seq[t], 0) + h * vh, vd, kh, vh, s.pos[t],
                      sh.kq_scale, &att_out[t * vd + h * vh]);
    }
  });
  apply_output_gate(w, sh, att_out, s.v.data(), s);
  kernels::matmul(w.wo, att_out, n, s.out.data(), *s.pool, s.mm);
}

}  // namespace

bool mla_expand_run(const MlaShape& sh, const MlaWeights& w, int64_t queries, int64_t keys) {
  if (sh.expanded_cache || !sh.expand_prefill || queries <= 1) return false;
  if (queries < kExpandMinQuantized && (is_block_type(w.k_b.type) || is_block_type(w.v_b.type))) return false;
  // Multiply-adds per head (docs/performance.md, "MLA prefill"): both paths
  // score and weigh the same (query, key) pairs, S of them; the absorbed one
  // pays kv_lora * (nope + v_head) per query (k_b into the query, v_b out of
  // the latent) and latent-wide dot products, the expanded one pays the same
  // per key and head-wide dot products.
  const double t = static_cast<double>(queries), keys_d = static_cast<double>(keys);
  const double pairs = t * (keys_d - t) + t * (t + 1) / 2;
  const double per_row = static_cast<double>(sh.kv_lora_rank * (sh.qk_nope + sh.v_head));
  const double absorbed = t * per_row + pairs * static_cast<double>(sh.latent_width() + sh.kv_lora_rank);
  const double expanded = kExpandCost * keys_d * per_row + pairs * static_cast<double>(sh.k_head() + sh.v_head);
  return expanded < absorbed;
}

uint64_t mla_context_scratch(const MlaShape& sh, const std::vector<const MlaWeights*>& layers, int64_t keys,
                             int64_t queries, ForwardState* s) {
  if (sh.expanded_cache || layers.empty()) return 0;
  // L: the longest sequence at which a chunk of at most `queries` tokens
  // expands in some layer. A chunk expands more readily the more queries it
  // has (mla_expand_run's saving grows with them), so the longest chunk is
  // the one to ask about; its saving is linear in the keys past it, so the
  // keys at which it expands are one range from the chunk's own length.
  int64_t longest = 0;
  size_t k_b_t = 0;
  for (const MlaWeights* w : layers) {
    const auto expands = [&](int64_t k) { return mla_expand_run(sh, *w, std::min(queries, k), k); };
    int64_t lo = std::min(queries, keys), hi = keys;
    if (lo < 2 || !expands(lo)) continue;
    while (lo < hi) {  // expands(lo) holds; find the last such key count up to hi
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (expands(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    longest = std::max(longest, lo);
    if (w->kv_b.rows == 0)
      k_b_t = std::max(k_b_t, static_cast<size_t>(sh.n_head * sh.qk_nope * sh.kv_lora_rank) *
                                  element_bytes(transposed_type(w->k_b.type)));
  }
  if (longest == 0) return 0;
  const int64_t kh = sh.k_head(), vh = sh.v_head, kb = std::min(longest, kExpandKeyBlock);
  const int64_t group = std::clamp(kExpandScratchBytes / (longest * (kh + vh) * 2), int64_t{1}, sh.n_head);
  const int64_t head_keys = std::max(group * kb, sh.n_head * std::min(longest, kExpandMinBlock));
  const size_t latents = static_cast<size_t>(kb * sh.kv_lora_rank), kf = static_cast<size_t>(head_keys * sh.qk_nope),
               vf = static_cast<size_t>(head_keys * vh), k16 = static_cast<size_t>(group * longest * kh),
               v16 = static_cast<size_t>(group * longest * vh), tasks = static_cast<size_t>(2 * sh.n_head);
  if (s) {
    s->xp_latents.assign(latents, 0.0f);
    s->xp_k_b_t.assign(k_b_t, 0);
    s->xp_kf.assign(kf, 0.0f);
    s->xp_vf.assign(vf, 0.0f);
    s->xp_k16.assign(k16, 0);
    s->xp_v16.assign(v16, 0);
    s->xp_tasks.assign(tasks, {});
  }
  return (latents + kf + vf) * sizeof(float) + k_b_t + (k16 + v16) * sizeof(uint16_t) +
         tasks * sizeof(kernels::MatmulTask);
}

void mla_attention(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s) {
  if (s.seqs->k_dim() != sh.cache_k_width() || s.seqs->v_dim() != sh.cache_v_width())
    bad_shape("the KV cache rows are " + std::to_string(s.seqs->k_dim()) + " + " + std::to_string(s.seqs->v_dim()) +
              " wide, expected " + std::to_string(sh.cache_k_width()) + " + " + std::to_string(sh.cache_v_width()));
  project(w, sh, s);
  if (sh.expanded_cache)
    attend_expanded(w, sh, il, s);
  else
    attend_latent(w, sh, il, s, nullptr);
}

void mla_project(const MlaWeights& w, const MlaShape& sh, ForwardState& s) { project(w, sh, s); }

void mla_attend(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s, const uint8_t* const* keep) {
  if (sh.expanded_cache) bad_shape("a position selection needs the latent cache");
  if (s.seqs->k_dim() != sh.cache_k_width() || s.seqs->v_dim() != 0)
    bad_shape("the KV cache rows are " + std::to_string(s.seqs->k_dim()) + " + " + std::to_string(s.seqs->v_dim()) +
              " wide, expected " + std::to_string(sh.cache_k_width()) + " + 0");
  attend_latent(w, sh, il, s, keep);
}

}  // namespace ns
