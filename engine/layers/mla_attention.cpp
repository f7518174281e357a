#include "engine/layers/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/sequence_state.h"
#include "engine/layers/attention.h"
#include "engine/ops.h"
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

[[noreturn]] void bad_shape(const std::string& what) {
  throw Error(ErrorKind::bad_model, "deepseek2 attention: " + what);
}

// Each thread's share of s.q16, in uint16s, a multiple of 64 bytes so the
// block formats' float scales stay aligned.
size_t thread_slot(const ForwardState& s) {
  return (s.q16.size() / static_cast<size_t>(s.pool->size())) & ~size_t{31};
}

// y[t*y_ts + h*y_hs + r] = W_h[r] . x[t*x_ts + h*x_hs ..] for every head h
// and token t: each head's small matrix applied to its slice of every token,
// heads spread over the threads (one pool dispatch, not one per head). The
// activations are converted to the weights' vec-dot type as matmul would.
void per_head_product(const ExpertsView& w, const float* x, int64_t x_ts, int64_t x_hs, float* y, int64_t y_ts,
                      int64_t y_hs, ForwardState& s) {
  const kernels::Isa isa = kernels::active_isa();
  const kernels::VecDotFn dot = kernels::vec_dot(w.type, isa);
  const size_t slot = thread_slot(s);
  const int64_t n = s.n;
  s.pool->parallel_for(w.n_expert, [&](int thread, int64_t h0, int64_t h1) {
    auto* xa = reinterpret_cast<uint8_t*>(&s.q16[static_cast<size_t>(thread) * slot]);
    for (int64_t h = h0; h < h1; ++h) {
      const kernels::MatrixView wh = w.expert(h);
      const auto* rows = static_cast<const uint8_t*>(wh.data);
      for (int64_t t = 0; t < n; ++t) {
        kernels::convert_activations(w.type, isa, x + t * x_ts + h * x_hs, xa, w.cols);
        float* out = y + t * y_ts + h * y_hs;
        for (int64_t r = 0; r < w.rows; ++r) out[r] = dot(rows + r * wh.row_stride, xa, w.cols);
      }
    }
  });
}

// The k part of a fused attn_kv_b ([n_head * (nope + v_head)] rows of kv_lora)
// transposed to per-head [kv_lora][nope] matrices. F16/BF16/F32 keep their type
// (the transposition is exact); block-quantized types are dequantized to F32.
void transpose_k_b(const kernels::MatrixView& kv_b, const MlaShape& sh, MlaWeights& w) {
  using gguf::GgmlType;
  const GgmlType type = kv_b.type == GgmlType::F16 || kv_b.type == GgmlType::BF16 ? kv_b.type : GgmlType::F32;
  const size_t elem = type == GgmlType::F32 ? 4 : 2;
  const int64_t kv_lora = sh.kv_lora_rank, nope = sh.qk_nope, per_head = sh.qk_nope + sh.v_head;
  const size_t head_bytes = static_cast<size_t>(kv_lora * nope) * elem;
  w.k_b_owned = std::make_unique<uint8_t[]>(head_bytes * static_cast<size_t>(sh.n_head));
  std::vector<float> row(static_cast<size_t>(kv_lora));
  for (int64_t h = 0; h < sh.n_head; ++h) {
    uint8_t* dst = w.k_b_owned.get() + static_cast<size_t>(h) * head_bytes;
    for (int64_t d = 0; d < nope; ++d) {
      const auto* src = static_cast<const uint8_t*>(kv_b.data) + static_cast<size_t>(h * per_head + d) * kv_b.row_stride;
      kernels::dequantize_row(kv_b.type, src, row.data(), kv_lora);
      for (int64_t r = 0; r < kv_lora; ++r) {
        uint8_t* out = dst + static_cast<size_t>(r * nope + d) * elem;
        if (type == GgmlType::F32) {
          std::memcpy(out, &row[r], 4);
        } else {
          const uint16_t v = type == GgmlType::F16 ? kernels::fp32_to_fp16(row[r]) : kernels::fp32_to_bf16(row[r]);
          std::memcpy(out, &v, 2);
        }
      }
    }
  }
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
    bad_shape("the key head size " + std::to_string(k_head) + " leaves no room beside " +
              std::to_string(sh.qk_rope) + " rope dims (rope.dimension_count, attention.key_length[_mla])");
  if (hp.is_mla() && hp.head_dim != sh.kv_lora_rank + sh.qk_rope)
    bad_shape("attention.key_length " + std::to_string(hp.head_dim) + " should be kv_lora_rank + rope dims = " +
              std::to_string(sh.kv_lora_rank + sh.qk_rope));
  sh.rms_eps = hp.rms_eps;
  sh.rope = rope_params(hp);
  // As the reference: undo the rope's YaRN magnitude correction to get the
  // original attn_factor, then scale the softmax by mscale^2 with
  // mscale = 1 + 0.1 * mscale_all_dim * ln(factor).
  const float ln_factor = std::log(1.0f / sh.rope.freq_scale);
  const float attn_factor_org = sh.rope.attn_factor * (1.0f + 0.1f * ln_factor);
  const float mscale = attn_factor_org * (1.0f + 0.1f * (hp.yarn_log_mul / 0.1f) * ln_factor);
  sh.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(k_head));
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
             layout == MlaLayout::fused ? Presence::required : Presence::tolerated);
  if (layout != MlaLayout::fused) {
    const Presence split = layout == MlaLayout::split ? Presence::required : Presence::optional;
    t.heads(p + "attn_k_b.weight", sh.n_head, sh.kv_lora_rank, sh.qk_nope, &w.k_b, split);
    t.heads(p + "attn_v_b.weight", sh.n_head, sh.v_head, sh.kv_lora_rank, &w.v_b, split);
  }
  t.matrix(p + "attn_gate.weight", v_rows, n_embd, R::input, &w.gate, gate);
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

namespace {

// att[t][n_head * v_head] *= sigmoid(gate · s.xn[t]) when the layer has an
// output gate; logits is [n][n_head * v_head] scratch.
void apply_output_gate(const MlaWeights& w, float* att, float* logits, ForwardState& s) {
  if (w.gate.rows == 0) return;
  kernels::matmul(w.gate, s.xn.data(), s.n, logits, *s.pool, s.mm);
  const int64_t n = s.n * w.gate.rows;
  for (int64_t i = 0; i < n; ++i) att[i] *= 1.0f / (1.0f + std::exp(-logits[i]));
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

// The latent path: cache the latents, absorb k_b into the queries, attend
// once per head over the shared latent rows, expand through v_b.
void attend_latent(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s) {
  const int64_t n = s.n, n_head = sh.n_head, kv_lora = sh.kv_lora_rank, lw = sh.latent_width();
  const int64_t q_width = n_head * sh.k_head();
  SequenceState& kv = *s.seqs;
  for (int64_t t = 0; t < n; ++t)
    kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * lw], kv.k(il, s.seq[t], s.pos[t]), lw);

  // q_lat_h = k_b_h q_nope_h; q_pe rides along.
  per_head_product(w.k_b, s.att.data(), q_width, sh.k_head(), s.q.data(), n_head * lw, lw, s);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < n_head; ++h)
      std::memcpy(&s.q[(t * n_head + h) * lw + kv_lora], &s.att[t * q_width + h * sh.k_head() + sh.qk_nope],
                  sizeof(float) * static_cast<size_t>(sh.qk_rope));

  float* latent_out = s.v.data();
  const size_t slot = thread_slot(s);
  s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
    uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
    for (int64_t i = begin; i < end; ++i) {
      kernels::quantize_row(gguf::GgmlType::F16, &s.q[i * lw], q16, lw);
      const int64_t t = i / n_head;
      attend_one_head(q16, kv.k(il, s.seq[t], 0), lw, kv.k(il, s.seq[t], 0), lw, lw, kv_lora, s.pos[t], sh.kq_scale,
                      &latent_out[i * kv_lora]);
    }
  });

  const int64_t v_width = n_head * sh.v_head;
  per_head_product(w.v_b, latent_out, n_head * kv_lora, kv_lora, s.att.data(), v_width, sh.v_head, s);
  apply_output_gate(w, s.att.data(), s.q.data(), s);
  kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
}

// The reference's path for fused attn_kv_b files: expand keys and values with
// one attn_kv_b matmul, cache them in F16, plain multi-head attention.
void attend_expanded(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s) {
  const int64_t n = s.n, n_head = sh.n_head, kv_lora = sh.kv_lora_rank, lw = sh.latent_width();
  const int64_t kh = sh.k_head(), vh = sh.v_head, kd = n_head * kh, vd = n_head * vh, per_head = sh.qk_nope + vh;
  SequenceState& kv = *s.seqs;
  float* expanded = s.v.data();  // [t][n_head * (nope + v)]
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
                      sh.kq_scale,
                      &att_out[t * vd + h * vh]);
    }
  });
  apply_output_gate(w, att_out, s.v.data(), s);
  kernels::matmul(w.wo, att_out, n, s.out.data(), *s.pool, s.mm);
}

}  // namespace

void mla_attention(const MlaWeights& w, const MlaShape& sh, int64_t il, ForwardState& s) {
  if (s.seqs->k_dim() != sh.cache_k_width() || s.seqs->v_dim() != sh.cache_v_width())
    bad_shape("the KV cache rows are " + std::to_string(s.seqs->k_dim()) + " + " + std::to_string(s.seqs->v_dim()) +
              " wide, expected " + std::to_string(sh.cache_k_width()) + " + " + std::to_string(sh.cache_v_width()));
  project(w, sh, s);
  if (sh.expanded_cache)
    attend_expanded(w, sh, il, s);
  else
    attend_latent(w, sh, il, s);
}

}  // namespace ns
