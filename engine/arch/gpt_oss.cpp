// gpt-oss (general.architecture "gpt-oss"; llama.cpp's src/models/openai-moe.cpp).
// A layer is
//   x += attention(rms_norm(x) * attn_norm)
//   x += moe(rms_norm(x) * post_attention_norm)
// Attention: GQA with Q/K/V biases, NEOX RoPE with YaRN (the sliding layers
// with rope.freq_base_swa when the file has it), scale 1/sqrt(head_dim), a
// learned sink logit per head in the softmax (attn_sinks), the output
// projection's bias. Layers alternate sliding-window and full attention
// (Hparams::swa_layers: even layers slide by default); a sliding layer's
// query at p sees p - n_swa + 1 .. p and its cache is a ring of rows
// (sequence_state.h), so it does not grow with the context.
// MoE: router with a bias; the top n_used experts chosen on the raw logits,
// weighted by a softmax over the chosen ones; experts with biases on gate, up
// and down, activated by the clamped SwiGLU of the reference
// (ops::swiglu_oai_mul, alpha 1.702, limit 7, fixed in its build_moe_ffn).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/arch/gpt_oss.h"
#include "engine/arch/layer_stack.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/yarn_rope.h"
#include "engine/state/ops.h"
#include "engine/state/sequence_state.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"

namespace ns {
namespace {

// The reference's constants for LLM_FFN_SWIGLU_OAI_MOE (not in the file's metadata).
constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

struct GptOssLayer {
  std::vector<float> attn_norm, ffn_norm;  // ffn_norm: post_attention_norm.weight
  kernels::MatrixView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;
  std::vector<float> sinks;  // [n_head]
  MoeWeights moe;
};

void add_bias(float* rows, const std::vector<float>& b, int64_t n, int64_t width) {
  if (b.empty()) return;
  for (int64_t t = 0; t < n; ++t) ops::add(rows + t * width, b.data(), width);
}

// Every tensor of a gpt-oss file's blocks, bound to `layers` (one per block).
void describe(const Hparams& hp, TensorTable& t, std::vector<GptOssLayer>& layers) {
  const int64_t d = hp.n_embd, hd = hp.head_dim, q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
  using R = TensorRole;
  const Presence optional = Presence::optional;
  describe_blocks(hp, t, layers, [&](int64_t, const std::string& p, GptOssLayer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    t.matrix(p + "attn_q.weight", q_dim, d, R::input, &L.wq);
    t.vector(p + "attn_q.bias", q_dim, R::bias, &L.bq, optional);
    t.matrix(p + "attn_k.weight", kv_dim, d, R::input, &L.wk);
    t.vector(p + "attn_k.bias", kv_dim, R::bias, &L.bk, optional);
    t.matrix(p + "attn_v.weight", kv_dim, d, R::input, &L.wv);
    t.vector(p + "attn_v.bias", kv_dim, R::bias, &L.bv, optional);
    t.matrix(p + "attn_output.weight", d, q_dim, R::residual, &L.wo);
    t.vector(p + "attn_output.bias", d, R::bias, &L.bo);
    t.vector(p + "attn_sinks.weight", hp.n_head, R::bias, &L.sinks);
    t.vector(p + "post_attention_norm.weight", d, R::norm, &L.ffn_norm);
    moe_tensors(t, p, hp, L.moe, {.router = Presence::required, .selection = std::nullopt});
    // Per-expert biases [n_expert][width] (GGUF dims [width, n_expert]), when the file has them.
    const auto n_expert = static_cast<uint64_t>(hp.n_expert), n_ff = static_cast<uint64_t>(hp.n_ff_expert);
    t.values(p + "ffn_gate_exps.bias", {n_ff, n_expert}, R::bias, &L.moe.gate_bias, optional);
    t.values(p + "ffn_up_exps.bias", {n_ff, n_expert}, R::bias, &L.moe.up_bias, optional);
    t.values(p + "ffn_down_exps.bias", {static_cast<uint64_t>(d), n_expert}, R::bias, &L.moe.down_bias, optional);
    // Fixed by the reference for this architecture, whatever the metadata says.
    L.moe.gating = ExpertGating::softmax_weight;
    L.moe.normalize_weights = false;
    L.moe.n_groups = L.moe.n_groups_used = 0;
    L.moe.act.kind = FfnActivation::Kind::swiglu_oai;
    L.moe.act.alpha = kSwigluAlpha;
    L.moe.act.limit = kSwigluLimit;
  });
}

class GptOss final : public LayerStack<GptOssLayer> {
 public:
  GptOss(const Hparams& hp, TensorLoader& t) : LayerStack(hp) {
    const std::string& a = hp.arch;
    if (!hp.is_moe()) throw Error(ErrorKind::bad_model, a + ": expert_count is missing (every layer is MoE)");
    if (hp.rope_dim != hp.head_dim || hp.head_dim_v != hp.head_dim)
      throw Error(ErrorKind::bad_model, a +
                                            ": rope.dimension_count and attention.value_length must equal the key "
                                            "length " +
                                            std::to_string(hp.head_dim) + " (the reference sizes heads by it)");
    rope_full_ = rope_params(hp_);
    Hparams swa = hp_;
    swa.rope_base = hp.rope_base_swa;
    rope_swa_ = rope_params(swa);

    load_layers(describe, hp_, t, layers_);
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b = gqa_buffer_sizes(hp_, hp_.n_ff_expert);
    for (int64_t il = 0; il < hp_.n_layer; ++il) b.cache.window.push_back(hp_.is_swa(il) ? hp_.n_swa : 0);
    return b;
  }

 private:
  void ffn(const GptOssLayer& L, ForwardState& s) const override { moe_ffn(L.moe, s); }

  void attention(const GptOssLayer& w, int64_t il, ForwardState& s) const override {
    const int64_t n = s.n, hd = hp_.head_dim, n_head = hp_.n_head, n_kv = hp_.n_head_kv;
    const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
    kernels::matmul(w.wq, s.xn.data(), n, s.q.data(), *s.pool, s.mm);
    kernels::matmul(w.wk, s.xn.data(), n, s.k.data(), *s.pool, s.mm);
    kernels::matmul(w.wv, s.xn.data(), n, s.v.data(), *s.pool, s.mm);
    add_bias(s.q.data(), w.bq, n, q_dim);
    add_bias(s.k.data(), w.bk, n, kv_dim);
    add_bias(s.v.data(), w.bv, n, kv_dim);

    const bool sliding = hp_.is_swa(il);
    const RopeParams& rope = sliding ? rope_swa_ : rope_full_;
    SequenceState& kv = *s.seqs;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = s.pos[t], seq = s.seq[t];
      apply_rope(&s.q[t * q_dim], n_head, hd, pos, rope);
      apply_rope(&s.k[t * kv_dim], n_kv, hd, pos, rope);
      kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * kv_dim], kv.k(il, seq, pos), kv_dim);
      kernels::quantize_row(gguf::GgmlType::F16, &s.v[t * kv_dim], kv.v(il, seq, pos), kv_dim);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t group = n_head / n_kv, ring = kv.rows(il);
    const size_t slot = s.q16.size() / static_cast<size_t>(s.pool->size());
    s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
      uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = i / n_head, h = i % n_head, kh = h / group, pos = s.pos[t], seq = s.seq[t];
        AttendSpan span;
        span.first_pos = sliding ? std::max<int64_t>(0, pos - hp_.n_swa + 1) : 0;
        span.ring = ring;
        span.sink = &w.sinks[static_cast<size_t>(h)];
        kernels::quantize_row(gguf::GgmlType::F16, &s.q[t * q_dim + h * hd], q16, hd);
        // Row 0 of the sequence's block: kv.k(il, seq, 0) is the ring's start.
        attend_one_head(q16, kv.k(il, seq, 0) + kh * hd, kv_dim, kv.v(il, seq, 0) + kh * hd, kv_dim, hd, hd, pos, scale,
                        &s.att[t * q_dim + h * hd], span);
      }
    });
    kernels::matmul(w.wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
    add_bias(s.out.data(), w.bo, n, hp_.n_embd);
  }

  RopeParams rope_full_, rope_swa_;
};

}  // namespace

std::unique_ptr<Architecture> make_gpt_oss(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<GptOss>(hp, loader);
}

void gpt_oss_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NEOX rope (the reference's rope type for this architecture); without
// attention.sliding_window_pattern every other layer slides (period 2: even layers).
const ArchTraits gpt_oss_traits = {.rope_type = RopeType::neox, .default_swa_period = 2};

}  // namespace ns
