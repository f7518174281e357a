// qwen2moe (Qwen1.5/Qwen2-MoE) and qwen3moe (Qwen3 MoE). A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += moe(rms_norm(x) * ffn_norm)
// with GQA attention and NEOX RoPE. qwen2moe: Q/K/V biases, routed weights
// not renormalized, plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp · x).
// qwen3moe: per-head RMS norms of Q and K before RoPE (attn_q_norm,
// attn_k_norm), no biases, routed weights renormalized, no shared expert.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/arch/qwen_moe.h"
#include "engine/sequence_state.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/residual.h"
#include "engine/layers/yarn_rope.h"
#include "engine/ops.h"
#include "engine/util/error.h"
#include "engine/util/thread_pool.h"

namespace ns {
namespace {

struct QwenAttention {
  kernels::MatrixView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;      // qwen2moe; empty when the file has none
  std::vector<float> q_norm, k_norm;  // qwen3moe: [head_dim], shared by all heads
};

struct QwenLayer {
  std::vector<float> attn_norm, ffn_norm;
  QwenAttention attn;
  MoeWeights moe;
};

std::vector<float> optional_vector(TensorLoader& t, const std::string& name, int64_t n) {
  return t.has(name) ? t.vector(name, n) : std::vector<float>{};
}

void add_bias(float* rows, const std::vector<float>& b, int64_t n, int64_t width) {
  if (b.empty()) return;
  for (int64_t t = 0; t < n; ++t) ops::add(rows + t * width, b.data(), width);
}

void norm_heads(float* rows, const std::vector<float>& w, int64_t n_rows, int64_t hd, float eps) {
  if (w.empty()) return;
  for (int64_t i = 0; i < n_rows; ++i) ops::rms_norm(rows + i * hd, w.data(), hd, eps, rows + i * hd);
}

class QwenMoe final : public Architecture {
 public:
  QwenMoe(const Hparams& hp, TensorLoader& t) : hp_(hp), rope_(rope_params(hp)) {
    const bool qwen3 = hp.arch == "qwen3moe";
    if (!hp.is_moe()) throw Error(ErrorKind::bad_model, hp.arch + ": expert_count is missing (every layer is MoE)");
    if (hp.rope_dim != hp.head_dim)
      throw Error(ErrorKind::bad_model, hp.arch + ": rope.dimension_count " + std::to_string(hp.rope_dim) +
                                            " must equal the head size " + std::to_string(hp.head_dim));
    const int64_t d = hp.n_embd, hd = hp.head_dim, q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
    shexp_width_ = hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      QwenLayer L;
      L.attn_norm = t.vector(p + "attn_norm.weight", d);
      L.attn.wq = t.matrix(p + "attn_q.weight", q_dim, d);
      L.attn.wk = t.matrix(p + "attn_k.weight", kv_dim, d);
      L.attn.wv = t.matrix(p + "attn_v.weight", kv_dim, d);
      L.attn.wo = t.matrix(p + "attn_output.weight", d, q_dim);
      L.attn.bq = optional_vector(t, p + "attn_q.bias", q_dim);
      L.attn.bk = optional_vector(t, p + "attn_k.bias", kv_dim);
      L.attn.bv = optional_vector(t, p + "attn_v.bias", kv_dim);
      if (qwen3) {
        L.attn.q_norm = t.vector(p + "attn_q_norm.weight", hd);
        L.attn.k_norm = t.vector(p + "attn_k_norm.weight", hd);
      }
      L.ffn_norm = t.vector(p + "ffn_norm.weight", d);
      L.moe = load_moe(t, p, hp);
      // The reference fixes these per architecture whatever the metadata says.
      L.moe.gating = ExpertGating::softmax;
      L.moe.normalize_weights = qwen3;
      L.moe.selection_bias.clear();
      if (!qwen3) {
        if (shexp_width_ <= 0)
          throw Error(ErrorKind::bad_model, "qwen2moe: expert_shared_feed_forward_length and feed_forward_length are missing");
        L.moe.has_shared = true;
        L.moe.shared.gate = t.matrix(p + "ffn_gate_shexp.weight", shexp_width_, d);
        L.moe.shared.up = t.matrix(p + "ffn_up_shexp.weight", shexp_width_, d);
        L.moe.shared.down = t.matrix(p + "ffn_down_shexp.weight", d, shexp_width_);
        L.moe.shared_gate_inp = t.vector(p + "ffn_gate_inp_shexp.weight", d);
      }
      layers_.push_back(std::move(L));
    }
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = b.att = hp_.n_head * hp_.head_dim;
    b.k = b.v = b.cache.k_dim = b.cache.v_dim = hp_.n_head_kv * hp_.head_dim;
    b.ff = std::max(hp_.n_ff_expert, hp_.arch == "qwen2moe" ? shexp_width_ : 0);
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const QwenLayer& L = layers_[static_cast<size_t>(il)];
    pre_norm_residual(s, L.attn_norm, hp_.n_embd, hp_.rms_eps, [&] { attention(L.attn, il, s); });
    pre_norm_residual(s, L.ffn_norm, hp_.n_embd, hp_.rms_eps, [&] { moe_ffn(L.moe, s); });
  }

 private:
  // GQA attention with the Qwen extras (biases, QK norms) before RoPE; the
  // softmax and accumulation are the shared attend_one_head.
  void attention(const QwenAttention& w, int64_t il, ForwardState& s) const {
    const int64_t n = s.n, hd = hp_.head_dim, n_head = hp_.n_head, n_kv = hp_.n_head_kv;
    const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
    kernels::matmul(w.wq, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
    kernels::matmul(w.wk, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
    kernels::matmul(w.wv, s.xn.data(), n, s.v.data(), *s.pool, s.mm);
    add_bias(s.q.data(), w.bq, n, q_dim);
    add_bias(s.k.data(), w.bk, n, kv_dim);
    add_bias(s.v.data(), w.bv, n, kv_dim);
    norm_heads(s.q.data(), w.q_norm, n * n_head, hd, hp_.rms_eps);
    norm_heads(s.k.data(), w.k_norm, n * n_kv, hd, hp_.rms_eps);

    SequenceState& kv = *s.seqs;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = s.pos[t], seq = s.seq[t];
      apply_rope(&s.q[t * q_dim], n_head, hd, pos, rope_);
      apply_rope(&s.k[t * kv_dim], n_kv, hd, pos, rope_);
      kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * kv_dim], kv.k(il, seq, pos), kv_dim);
      kernels::quantize_row(gguf::GgmlType::F16, &s.v[t * kv_dim], kv.v(il, seq, pos), kv_dim);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t group = n_head / n_kv;
    const size_t slot = s.q16.size() / static_cast<size_t>(s.pool->size());
    s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
      uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = i / n_head, h = i % n_head, kh = h / group;
        kernels::quantize_row(gguf::GgmlType::F16, &s.q[t * q_dim + h * hd], q16, hd);
        attend_one_head(q16, kv.k(il, s.seq[t], 0) + kh * hd, kv_dim, kv.v(il, s.seq[t], 0) + kh * hd, kv_dim, hd, hd,
                        s.pos[t], scale,
                        &s.att[t * q_dim + h * hd]);
      }
    });
    kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
  }

  Hparams hp_;
  RopeParams rope_;
  int64_t shexp_width_ = 0;
  std::vector<QwenLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<QwenMoe>(hp, loader);
}

}  // namespace ns
