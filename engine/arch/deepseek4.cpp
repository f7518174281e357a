// deepseek4 (DeepSeek V4 / V4-Flash; the reference's src/models/deepseek4.cpp
// and src/llama-kv-cache-dsv4.*). Facts, not code:
//
// Hyper-connections: each token carries hc (4) residual streams. Before the
// attention and before the FFN, mixes = fn · rms_norm(all streams flat)
// ((2 + hc) * hc values): pre = sigmoid(mixes[0:hc] * scale[0] + base) + eps
// weighs the streams into the sublayer's input; post = 2 sigmoid(... scale[1])
// and comb (hc x hc, scale[2], a softmax over the destination then Sinkhorn
// normalisation: columns once, then rows and columns for the remaining
// iterations, eps added to every sum) give stream dst' = out * post[dst] +
// sum_src comb[dst][src] * stream[src]. The head mixes the streams by its own
// pre weights (output_hc_*) before the shared output norm.
//
// Attention: q = wq_b · rms_norm(wq_a · x) with a weightless RMS norm per head;
// one key/value head kv = rms_norm(wkv · x) (K = V, head_dim wide); NORM RoPE
// over the last rope dims of each head (compressed layers: the compress base
// and the file's YaRN, magnitude 1; the others: rope.freq_base, no scaling);
// scale 1/sqrt(head_dim), a sink logit per head. Every layer sees its raw keys
// of the last n_swa positions, plus by its compression ratio: 0 nothing; 128
// every completed block of 128 positions (HCA); 4 the indexer's top-k of the
// completed blocks of 4 (CSA). A block b is compressed when its last position
// arrives: a per-dimension softmax over positions of (wgate · x + ape[pos %
// ratio]) weighs (wkv · x), then an RMS norm and RoPE at position b * ratio.
// Ratio 4 overlaps: the 2 * head_dim wide projections give the previous
// block's first half and this block's second half, 8 rows (block 0: the
// previous half is zero with score -inf). The indexer compresses the same way
// at its own width (Hadamard-rotated, as the reference's indexer cache is),
// and scores a block sum_h relu(q_h · k) * w_h with q = indexer.attn_q_b · q
// latent (roped, rotated) and w = indexer.proj · x / sqrt(dim * heads).
// Output: the roped dims rotated back at the query's position, then the
// grouped low-rank projection: each of o_groups groups of heads through its
// own wo_a rows, then wo_b.
//
// FFN: routed experts scored sqrt(softplus(logit)) with the selection bias,
// except the first hash_layer_count layers, whose experts come from the token
// id (ffn_gate_tid2eid); weights normalised then scaled; SwiGLU clamped
// (swiglu_clamp_exp / _shexp); shared experts. NextN (MTP) blocks are skipped.
//
// Cache, as the reference's DSV4 cache lays it out (SequenceState): the raw
// keys (F16) in a sliding ring of the window (every layer); the finished
// compressed blocks, compact (one row per block of `ratio` positions: the
// compressed key, F16, and at ratio 4 the indexer's beside it); and the
// compressors' running state (F32 kv and score) of the last positions a block
// still needs, a ring per sequence (2 x ratio positions for the overlapping
// ratio 4 and the indexer, ratio for 128). A pass computes its tokens' state
// in scratch, compresses the blocks that complete in it from the scratch and
// the ring, then stores its tokens' state in the ring.
#include "engine/arch/deepseek4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/indexer.h"
#include "engine/layers/attention.h"
#include "engine/layers/ffn.h"
#include "engine/layers/stream_mix.h"
#include "engine/layers/yarn_rope.h"
#include "engine/state/ops.h"
#include "engine/state/sequence_state.h"
#include "engine/state/trace.h"
#include "engine/util/thread_pool.h"
#include "engine/spec/metadata_keys.h"

namespace ns {
namespace {

constexpr int64_t kCsa = 4;  // the reference's two compression ratios (fixed in its graph)
constexpr int64_t kHca = 128;
constexpr size_t kHc = 4;  // hyper-connection streams (the reference's graph is written for 4; checked at load)
constexpr int64_t kLaneAlign = 16;  // the attention's widest lane count (engine/layers/attention.h)

struct HcWeights {
  kernels::MatrixView fn;  // [mix][hc * n_embd]
  std::vector<float> base, scale;
};

struct Dsv4Layer {
  std::vector<float> attn_norm, ffn_norm, sinks, q_a_norm, kv_norm;
  kernels::MatrixView wq_a, wq_b, wkv, wo_a, wo_b;
  HcWeights hc_attn, hc_ffn;
  int64_t ratio = 0;
  kernels::MatrixView comp_wkv, comp_wgate;
  std::vector<float> comp_ape, comp_norm;  // ape [ratio][coff * head_dim]
  kernels::MatrixView idx_proj, idx_q_b, idx_wkv, idx_wgate;
  std::vector<float> idx_ape, idx_norm;
  MoeWeights moe;
};

struct Dsv4Weights {
  HcWeights head;  // output_hc_*: fn [hc][hc * n_embd], base [hc], scale [1]
  std::vector<Dsv4Layer> layers;
};

void hc_tensors(TensorTable& t, const std::string& p, int64_t mix, int64_t width, int64_t n_scale, HcWeights& w) {
  using R = TensorRole;
  t.matrix(p + "_fn.weight", mix, width, R::score, &w.fn);
  t.vector(p + "_base.weight", mix, R::bias, &w.base);
  t.vector(p + "_scale.weight", n_scale, R::bias, &w.scale);
}

void describe(const Hparams& hp, TensorTable& t, Dsv4Weights& w) {
  const auto& v4 = hp.dsv4;
  const int64_t d = hp.n_embd, hd = hp.head_dim, hc = v4.hc, mix = (2 + hc) * hc;
  const int64_t group_dim = hp.n_head * hd / std::max<int64_t>(v4.o_groups, 1);
  const int64_t ihd = v4.indexer_head_dim, n_ff = hp.n_ff_expert;
  using R = TensorRole;
  hc_tensors(t, "output_hc", hc, hc * d, 1, w.head);
  describe_blocks(hp, t, w.layers, [&](int64_t il, const std::string& p, Dsv4Layer& L) {
    t.vector(p + "attn_norm.weight", d, R::norm, &L.attn_norm);
    t.vector(p + "attn_sinks.weight", hp.n_head, R::bias, &L.sinks);
    t.matrix(p + "attn_q_a.weight", hp.q_lora_rank, d, R::input, &L.wq_a);
    t.vector(p + "attn_q_a_norm.weight", hp.q_lora_rank, R::norm, &L.q_a_norm);
    t.matrix(p + "attn_q_b.weight", hp.n_head * hd, hp.q_lora_rank, R::input, &L.wq_b);
    t.matrix(p + "attn_kv.weight", hd, d, R::input, &L.wkv);
    t.vector(p + "attn_kv_a_norm.weight", hd, R::norm, &L.kv_norm);
    t.matrix(p + "attn_output_a.weight", v4.o_lora_rank * v4.o_groups, group_dim, R::input, &L.wo_a);
    t.matrix(p + "attn_output_b.weight", d, v4.o_groups * v4.o_lora_rank, R::residual, &L.wo_b);
    hc_tensors(t, p + "hc_attn", mix, hc * d, 3, L.hc_attn);
    hc_tensors(t, p + "hc_ffn", mix, hc * d, 3, L.hc_ffn);
    L.ratio = v4.compress_ratios[static_cast<size_t>(il)];
    if (L.ratio != 0) {
      const int64_t coff = L.ratio == kCsa ? 2 : 1;
      t.matrix(p + "attn_compressor_kv.weight", coff * hd, d, R::input, &L.comp_wkv);
      t.matrix(p + "attn_compressor_gate.weight", coff * hd, d, R::input, &L.comp_wgate);
      t.values(p + "attn_compressor_ape.weight", {static_cast<uint64_t>(coff * hd), static_cast<uint64_t>(L.ratio)},
               R::bias, &L.comp_ape);
      t.vector(p + "attn_compressor_norm.weight", hd, R::norm, &L.comp_norm);
      if (L.ratio == kCsa) {
        t.matrix(p + "indexer.proj.weight", v4.indexer_heads, d, R::input, &L.idx_proj);
        t.matrix(p + "indexer.attn_q_b.weight", v4.indexer_heads * ihd, hp.q_lora_rank, R::input, &L.idx_q_b);
        t.matrix(p + "indexer_compressor_kv.weight", 2 * ihd, d, R::input, &L.idx_wkv);
        t.matrix(p + "indexer_compressor_gate.weight", 2 * ihd, d, R::input, &L.idx_wgate);
        t.values(p + "indexer_compressor_ape.weight", {static_cast<uint64_t>(2 * ihd), kCsa}, R::bias, &L.idx_ape);
        t.vector(p + "indexer_compressor_norm.weight", ihd, R::norm, &L.idx_norm);
      }
    }
    const bool hashed = il < v4.hash_layers;
    moe_tensors(t, p, hp, L.moe,
                {.router = std::nullopt, .selection = hashed ? std::nullopt : std::optional(Presence::required)});
    if (hashed)
      t.ids(p + "ffn_gate_tid2eid.weight", {static_cast<uint64_t>(hp.n_expert_used), static_cast<uint64_t>(hp.n_vocab)},
            &L.moe.hash_experts);
    t.vector(p + "ffn_norm.weight", d, R::norm, &L.ffn_norm);
    ffn_tensors(t, p, "_shexp", n_ff * std::max<int64_t>(hp.n_expert_shared, 1), d, L.moe.shared);
    L.moe.has_shared = true;
    L.moe.gating = ExpertGating::sqrt_softplus;
    L.moe.normalize_weights = hp.expert_weights_norm;
    L.moe.weights_scale = hp.expert_weights_scale;
    L.moe.n_groups = L.moe.n_groups_used = 0;
    const auto clamp = [&](const std::vector<float>& limits) {
      FfnActivation a;
      const float limit = limits.empty() ? 0.0f : limits[static_cast<size_t>(il)];
      if (limit > 1e-6f) {
        a.kind = FfnActivation::Kind::swiglu_clamp;
        a.limit = limit;
      }
      return a;
    };
    L.moe.act = clamp(hp.swiglu_clamp_exp);
    L.moe.shared.act = clamp(hp.swiglu_clamp_shexp.empty() ? hp.swiglu_clamp_exp : hp.swiglu_clamp_shexp);
  });
}

// x * 1/sqrt(mean(x^2) + eps) (the weightless norm; ggml's sum in double).
void rms_scale(const float* x, int64_t n, float eps, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The normalised Walsh-Hadamard transform of each block of n (a power of 2) in x[len].
void hadamard(float* x, int64_t len, int64_t n) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t b = 0; b < len; b += n) {
    float* r = x + b;
    for (int64_t j = 0; j < n; ++j) r[j] *= scale;
    for (int64_t h = 1; h < n; h <<= 1)
      for (int64_t i = 0; i < n; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float u = r[j], v = r[j + h];
          r[j] = u + v;
          r[j + h] = u - v;
        }
  }
}

// The reference's rotation size for a head of n: the largest power of two >= 64 dividing it (64 at least).
int64_t hadamard_size(int64_t n) {
  int64_t r = 64;
  do r *= 2;
  while (n % r == 0);
  return r / 2;
}

class Deepseek4 final : public Architecture {
 public:
  Deepseek4(const Hparams& hp, TensorLoader& t) : hp_(hp) {
    const auto& v4 = hp.dsv4;
    auto bad = [](const std::string& m) { throw Error(ErrorKind::bad_model, "deepseek4: " + m); };
    if (v4.hc != 4) bad("hyper_connection.count must be 4 (the reference's graph is written for 4 streams)");
    if (v4.hc_sinkhorn_iters <= 0) bad("hyper_connection.sinkhorn_iterations is missing");
    if (v4.o_lora_rank <= 0) bad("attention.output_lora_rank is missing");
    if (static_cast<int64_t>(v4.compress_ratios.size()) < hp.n_layer) bad("attention.compress_ratios is missing");
    if (hp.expert_gating != ExpertGating::sqrt_softplus)
      bad("expert_gating_func must be 4 (sqrtsoftplus), as the reference requires");
    if (!hp.is_moe()) bad("expert_count is missing (every layer is MoE)");
    if (hp.head_dim_v != hp.head_dim) bad("attention.value_length must equal key_length (keys are the values)");
    if (v4.o_groups <= 0 || hp.n_head % v4.o_groups) bad("attention.output_group_count must divide head_count");
    if (hp.n_swa <= 0) bad("attention.sliding_window is missing");
    if (hp.rope_dim > hp.head_dim || hp.rope_dim > v4.indexer_head_dim)
      bad("rope.dimension_count exceeds the head or indexer key length");
    if (hp.head_dim == v4.indexer_head_dim)
      bad("attention.key_length equal to attention.indexer.key_length is not supported (the reference then "
          "Hadamard-rotates every cache)");
    if (v4.indexer_head_dim % 64) bad("attention.indexer.key_length must be a multiple of 64");
    for (int64_t r : v4.compress_ratios) {
      if (r == kCsa && (v4.indexer_heads <= 0 || v4.indexer_top_k <= 0))
        bad("a ratio-4 layer needs attention.indexer.head_count, key_length and top_k");
    }
    load_layers(describe, hp_, t, w_);
    for (const Dsv4Layer& L : w_.layers)
      for (int32_t e : L.moe.hash_experts)
        if (e < 0 || e >= hp.n_expert)
          bad("ffn_gate_tid2eid names expert " + std::to_string(e) + " of " + std::to_string(hp.n_expert));
    rope_plain_ = RopeParams{};
    rope_plain_.n_dims = hp.rope_dim;
    rope_plain_.type = RopeType::norm;
    rope_plain_.base = hp.rope_base;
    Hparams c = hp;
    c.rope_base = v4.compress_rope_base;
    rope_comp_ = rope_params(c);
    rope_comp_.type = RopeType::norm;
    // The reference cancels YaRN's magnitude on these layers: attn_factor = 1 / (1 + 0.1 ln(1/s)).
    rope_comp_.attn_factor =
        rope_comp_.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * std::log(1.0f / rope_comp_.freq_scale)) : 1.0f;
    rot_ = hadamard_size(v4.indexer_head_dim);
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b;
    b.q = b.att = hp_.n_head * hp_.head_dim;
    b.k = hp_.head_dim;
    b.ff = hp_.n_ff_expert * std::max<int64_t>(hp_.n_expert_shared, 1);
    b.cache.k_dim = hp_.head_dim;  // the raw key; K = V
    b.cache.v_dim = 0;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const int64_t r = w_.layers[static_cast<size_t>(il)].ratio;
      b.cache.window.push_back(hp_.n_swa);
      b.cache.block_ratio.push_back(r);
      b.cache.block_width.push_back(r == 0 ? 0 : hp_.head_dim + (r == kCsa ? hp_.dsv4.indexer_head_dim : 0));
      b.cache.ring_floats.push_back(r == 0 ? 0 : comp_ring(r).floats() + (r == kCsa ? idx_ring().floats() : 0));
    }
    b.res_checkpoints = hp_.dsv4.hc;
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const Dsv4Layer& L = w_.layers[static_cast<size_t>(il)];
    const int64_t n = s.n, d = hp_.n_embd, hc = hp_.dsv4.hc;
    if (il == 0)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < hc; ++h) std::copy_n(&s.x[t * d], d, &s.res_ckpt[(t * hc + h) * d]);
    hc_pre(L.hc_attn, L.attn_norm, s);
    trace(s, "attn_norm", il, s.xn.data(), hp_.n_embd);
    attention(L, il, s);
    trace(s, "attn_out", il, s.out.data(), hp_.n_embd);
    hc_post(s);
    hc_pre(L.hc_ffn, L.ffn_norm, s);
    trace(s, "ffn_norm", il, s.xn.data(), hp_.n_embd);
    moe_ffn(L.moe, s);
    trace(s, "ffn_out", il, s.out.data(), hp_.n_embd);
    hc_post(s);
    trace(s, "l_last", il, s.res_ckpt.data(), hc * hp_.n_embd);
  }

  void before_output(ForwardState& s) override {
    const int64_t n = s.n, d = hp_.n_embd, hc = hp_.dsv4.hc;
    flat_mixes(w_.head, s);
    for (int64_t t = 0; t < n; ++t) {
      const float* m = &mixes_[static_cast<size_t>(t * hc)];
      std::array<float, kHc> pre;
      std::array<const float*, kHc> streams;
      for (int64_t h = 0; h < hc; ++h) {
        pre[h] = sigmoid(m[h] * w_.head.scale[0] + w_.head.base[static_cast<size_t>(h)]) + hp_.dsv4.hc_eps;
        streams[h] = &s.res_ckpt[(t * hc + h) * d];
      }
      mix_rows(streams.data(), pre.data(), hc, d, &s.x[t * d]);
    }
  }

 private:
  // mixes_[t][fn.rows] = fn · rms_norm(token t's streams, flat).
  void flat_mixes(const HcWeights& w, ForwardState& s) {
    const int64_t n = s.n, width = hp_.dsv4.hc * hp_.n_embd;
    flat_.resize(static_cast<size_t>(n * width));
    mixes_.resize(static_cast<size_t>(n * w.fn.rows));
    for (int64_t t = 0; t < n; ++t) rms_scale(&s.res_ckpt[t * width], width, hp_.rms_eps, &flat_[t * width]);
    kernels::matmul(w.fn, flat_.data(), n, mixes_.data(), *s.pool, s.mm);
  }

  // The streams -> s.xn (the sublayer's normed input); post_ and comb_ kept for hc_post.
  void hc_pre(const HcWeights& w, const std::vector<float>& norm, ForwardState& s) {
    const int64_t n = s.n, d = hp_.n_embd, hc = hp_.dsv4.hc, mix = (2 + hc) * hc;
    const float eps = hp_.dsv4.hc_eps;
    flat_mixes(w, s);
    post_.resize(static_cast<size_t>(n * hc));
    comb_.resize(static_cast<size_t>(n * hc * hc));
    cur_.resize(static_cast<size_t>(d));
    for (int64_t t = 0; t < n; ++t) {
      const float* m = &mixes_[static_cast<size_t>(t * mix)];
      float* x = cur_.data();
      std::array<float, kHc> pre;
      std::array<const float*, kHc> streams;
      for (int64_t h = 0; h < hc; ++h) {
        pre[h] = sigmoid(m[h] * w.scale[0] + w.base[static_cast<size_t>(h)]) + eps;
        const float post = m[hc + h] * w.scale[1] + w.base[static_cast<size_t>(hc + h)];
        post_[static_cast<size_t>(t * hc + h)] = 2.0f * sigmoid(post);
        streams[h] = &s.res_ckpt[(t * hc + h) * d];
      }
      mix_rows(streams.data(), pre.data(), hc, d, x);
      // comb[dst + hc * src]: softmax over dst for each src, + eps; Sinkhorn. The affine step and the + eps are
      // fused multiply-adds as the reference's compiled hc_comb op makes them (GCC contracts them there).
      float* c = &comb_[static_cast<size_t>(t * hc * hc)];
      for (int64_t src = 0; src < hc; ++src) {
        float mx = -INFINITY;
        for (int64_t dst = 0; dst < hc; ++dst) {
          const int64_t k = dst + hc * src;
          c[k] = std::fma(m[2 * hc + k], w.scale[2], w.base[static_cast<size_t>(2 * hc + k)]);
          mx = std::max(mx, c[k]);
        }
        float sum = 0;
        for (int64_t dst = 0; dst < hc; ++dst) sum += c[dst + hc * src] = std::exp(c[dst + hc * src] - mx);
        const float inv = 1.0f / sum;
        for (int64_t dst = 0; dst < hc; ++dst) c[dst + hc * src] = std::fma(c[dst + hc * src], inv, eps);
      }
      const auto norm_cols = [&] {
        for (int64_t dst = 0; dst < hc; ++dst) {
          float sum = eps;
          for (int64_t src = 0; src < hc; ++src) sum += c[dst + hc * src];
          const float inv = 1.0f / sum;
          for (int64_t src = 0; src < hc; ++src) c[dst + hc * src] *= inv;
        }
      };
      const auto norm_rows = [&] {
        for (int64_t src = 0; src < hc; ++src) {
          float sum = eps;
          for (int64_t dst = 0; dst < hc; ++dst) sum += c[dst + hc * src];
          const float inv = 1.0f / sum;
          for (int64_t dst = 0; dst < hc; ++dst) c[dst + hc * src] *= inv;
        }
      };
      norm_cols();
      for (int64_t i = 1; i < hp_.dsv4.hc_sinkhorn_iters; ++i) {
        norm_rows();
        norm_cols();
      }
      ops::rms_norm(x, norm.data(), d, hp_.rms_eps, &s.xn[t * d]);
    }
  }

  // s.out and the streams -> the streams.
  void hc_post(ForwardState& s) {
    const int64_t n = s.n, d = hp_.n_embd, hc = hp_.dsv4.hc;
    old_.resize(static_cast<size_t>(hc * d));
    for (int64_t t = 0; t < n; ++t) {
      float* st = &s.res_ckpt[t * hc * d];
      std::copy_n(st, hc * d, old_.data());
      const float* c = &comb_[static_cast<size_t>(t * hc * hc)];
      // Stream dst' = out * post[dst] + sum_src old[src] * comb[dst][src], in that order.
      std::array<const float*, kHc + 1> rows;
      std::array<float, kHc + 1> wts;
      rows[0] = &s.out[t * d];
      for (int64_t src = 0; src < hc; ++src) rows[src + 1] = &old_[static_cast<size_t>(src * d)];
      for (int64_t dst = 0; dst < hc; ++dst) {
        wts[0] = post_[static_cast<size_t>(t * hc + dst)];
        for (int64_t src = 0; src < hc; ++src) wts[src + 1] = c[dst + hc * src];
        mix_rows(rows.data(), wts.data(), hc + 1, d, st + dst * d);
      }
    }
  }

  // One compressor's running state: `size` positions of rows [kv (w) | score (w)], position p in row p % size.
  struct Ring {
    int64_t size = 0, w = 0, off = 0;  // off: its first float in the layer's ring
    int64_t row() const { return 2 * w; }
    int64_t floats() const { return size * row(); }
  };
  // The attention's compressor (2 x head_dim wide overlapping at ratio 4) and the indexer's (after it).
  Ring comp_ring(int64_t r) const { return r == kCsa ? Ring{2 * kCsa, 2 * hp_.head_dim, 0} : Ring{r, hp_.head_dim, 0}; }
  Ring idx_ring() const { return Ring{2 * kCsa, 2 * hp_.dsv4.indexer_head_dim, comp_ring(kCsa).floats()}; }

  // This pass's token of (seq, pos) (by_pos_ is sorted), or -1.
  int64_t token_at(int64_t seq, int64_t pos) const {
    const auto it =
        std::lower_bound(by_pos_.begin(), by_pos_.end(), std::pair{seq, pos}, [](const auto& a, const auto& b) {
          return std::pair{a[0], a[1]} < b;
        });
    return it != by_pos_.end() && (*it)[0] == seq && (*it)[1] == pos ? (*it)[2] : -1;
  }

  // Compresses the block of ratio r ending at pos from the state rows of ring `g`: this pass's (scratch
  // [n][g.row()]) or the layer's ring; output width `w` (overlap: the rows' halves), F16 into `out`.
  void compress(SequenceState& kv, int64_t il, int64_t seq, int64_t pos, int64_t r, bool overlap, const Ring& g,
                const float* scratch, int64_t w, const std::vector<float>& norm, bool rotate, uint16_t* out) {
    const int64_t start = pos + 1 - r, block = pos / r, n_rows = overlap ? 2 * r : r, sw = g.w;
    const float* ring = kv.ring(il, seq) + g.off;
    src_.resize(static_cast<size_t>(n_rows));
    for (int64_t j = 0; j < n_rows; ++j) {
      const bool prev = overlap && j < r;
      const int64_t p = prev ? start - r + j : start + (overlap ? j - r : j);
      const float* row = nullptr;  // before position 0: score -inf
      if (p >= 0) {
        const int64_t t = token_at(seq, p);
        row = t >= 0 ? scratch + t * g.row() : ring + p % g.size * g.row();
        if (overlap && !prev) row += w;  // this block's half
      }
      src_[static_cast<size_t>(j)] = row;
    }
    comp_.assign(static_cast<size_t>(w), 0.0f);
    std::vector<float>& e = comp_e_;
    e.resize(static_cast<size_t>(n_rows));
    for (int64_t i = 0; i < w; ++i) {
      float mx = -INFINITY;
      for (int64_t j = 0; j < n_rows; ++j) {
        const float* row = src_[static_cast<size_t>(j)];
        e[static_cast<size_t>(j)] = row ? row[sw + i] : -INFINITY;
        mx = std::max(mx, e[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (auto& v : e) sum += v = std::exp(v - mx);
      const float inv = static_cast<float>(1.0 / sum);
      float acc = 0;
      for (int64_t j = 0; j < n_rows; ++j)
        if (const float* row = src_[static_cast<size_t>(j)]) acc += row[i] * (e[static_cast<size_t>(j)] * inv);
      comp_[static_cast<size_t>(i)] = acc;
    }
    ops::rms_norm(comp_.data(), norm.data(), w, hp_.rms_eps, comp_.data());
    apply_rope(comp_.data() + (w - hp_.rope_dim), 1, w, block * r, rope_comp_);
    if (rotate) hadamard(comp_.data(), w, rot_);
    kernels::quantize_row(gguf::GgmlType::F16, comp_.data(), out, w);
  }

  // This pass's compressor state [n][g.row()]: kv = wkv · x, score = wgate · x + ape[pos % ratio].
  void state_rows(const kernels::MatrixView& wkv, const kernels::MatrixView& wgate, const std::vector<float>& ape,
                  int64_t r, const Ring& g, ForwardState& s, std::vector<float>& out) {
    const int64_t n = s.n, w = g.w;
    st_kv_.resize(static_cast<size_t>(n * w));
    st_sc_.resize(static_cast<size_t>(n * w));
    out.resize(static_cast<size_t>(n * g.row()));
    kernels::matmul(wkv, s.xn.data(), n, st_kv_.data(), *s.pool, s.mm);
    kernels::matmul(wgate, s.xn.data(), n, st_sc_.data(), *s.pool, s.mm);
    for (int64_t t = 0; t < n; ++t) {
      float* row = &out[static_cast<size_t>(t * g.row())];
      std::copy_n(&st_kv_[t * w], w, row);
      const float* a = &ape[static_cast<size_t>(s.pos[t] % r * w)];
      for (int64_t i = 0; i < w; ++i) row[w + i] = st_sc_[t * w + i] + a[i];
    }
  }

  // Stores this pass's state rows in the ring, in position order (the latest position of a row wins).
  void keep_state(SequenceState& kv, int64_t il, const Ring& g, const std::vector<float>& scratch) const {
    for (const auto& [seq, pos, t] : by_pos_)
      std::copy_n(&scratch[static_cast<size_t>(t * g.row())], g.row(),
                  kv.ring(il, seq) + g.off + pos % g.size * g.row());
  }

  void attention(const Dsv4Layer& L, int64_t il, ForwardState& s) {
    const auto& v4 = hp_.dsv4;
    const int64_t n = s.n, hd = hp_.head_dim, nh = hp_.n_head, nope = hd - hp_.rope_dim;
    const int64_t ql = hp_.q_lora_rank, ihd = v4.indexer_head_dim, nih = v4.indexer_heads, r = L.ratio;
    const RopeParams& rope = r != 0 ? rope_comp_ : rope_plain_;
    SequenceState& kv = *s.seqs;
    qr_.resize(static_cast<size_t>(n * ql));
    kvp_.resize(static_cast<size_t>(n * hd));
    kernels::matmul(L.wq_a, s.xn.data(), n, qr_.data(), *s.pool, s.mm);
    for (int64_t t = 0; t < n; ++t) ops::rms_norm(&qr_[t * ql], L.q_a_norm.data(), ql, hp_.rms_eps, &qr_[t * ql]);
    trace(s, "qr_norm", il, qr_.data(), ql);
    kernels::matmul(L.wq_b, qr_.data(), n, s.q.data(), *s.pool, s.mm);
    kernels::matmul(L.wkv, s.xn.data(), n, kvp_.data(), *s.pool, s.mm);
    for (int64_t t = 0; t < n; ++t) {
      float* q = &s.q[t * nh * hd];
      for (int64_t h = 0; h < nh; ++h) rms_scale(q + h * hd, hd, hp_.rms_eps, q + h * hd);
      apply_rope(q + nope, nh, hd, s.pos[t], rope);
      float* k = &kvp_[t * hd];
      ops::rms_norm(k, L.kv_norm.data(), hd, hp_.rms_eps, k);
      apply_rope(k + nope, 1, hd, s.pos[t], rope);
      kernels::quantize_row(gguf::GgmlType::F16, k, kv.k(il, s.seq[t], s.pos[t]), hd);
    }
    // The compressor state of this pass's tokens, the blocks that complete here, then the state kept.
    if (r != 0) {
      by_pos_.resize(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) by_pos_[static_cast<size_t>(t)] = {s.seq[t], s.pos[t], t};
      std::sort(by_pos_.begin(), by_pos_.end());
      const Ring cg = comp_ring(r), ig = idx_ring();
      state_rows(L.comp_wkv, L.comp_wgate, L.comp_ape, r, cg, s, comp_st_);
      if (r == kCsa) state_rows(L.idx_wkv, L.idx_wgate, L.idx_ape, r, ig, s, idx_st_);
      for (int64_t t = 0; t < n; ++t) {
        if ((s.pos[t] + 1) % r != 0) continue;
        uint16_t* out = kv.block(il, s.seq[t], s.pos[t] / r);
        compress(kv, il, s.seq[t], s.pos[t], r, r == kCsa, cg, comp_st_.data(), hd, L.comp_norm, false, out);
        if (r == kCsa)
          compress(kv, il, s.seq[t], s.pos[t], r, true, ig, idx_st_.data(), ihd, L.idx_norm, true, out + hd);
      }
      keep_state(kv, il, cg, comp_st_);
      if (r == kCsa) keep_state(kv, il, ig, idx_st_);
    }
    trace(s, "kv_roped", il, kvp_.data(), hd);
    // The indexer's choice of compressed blocks for each token (ratio 4).
    const int64_t top_k = v4.indexer_top_k;
    chosen_.assign(static_cast<size_t>(n * std::max<int64_t>(top_k, 1)), -1);
    if (r == kCsa) {
      iq_.resize(static_cast<size_t>(n * nih * ihd));
      iw_.resize(static_cast<size_t>(n * nih));
      kernels::matmul(L.idx_q_b, qr_.data(), n, iq_.data(), *s.pool, s.mm);
      kernels::matmul(L.idx_proj, s.xn.data(), n, iw_.data(), *s.pool, s.mm);
      const float wscale = 1.0f / std::sqrt(static_cast<float>(ihd * nih));
      s.pool->parallel_for(n, [&](int, int64_t begin, int64_t end) {
        // Per pool thread, grown to the largest sizes seen: a warm loop does not allocate.
        thread_local std::vector<float> score, wt;
        thread_local std::vector<int32_t> order;
        wt.resize(static_cast<size_t>(nih));
        for (int64_t t = begin; t < end; ++t) {
          float* q = &iq_[t * nih * ihd];
          apply_rope(q + (ihd - hp_.rope_dim), nih, ihd, s.pos[t], rope_comp_);
          hadamard(q, nih * ihd, rot_);
          const int64_t vis = (s.pos[t] + 1) / kCsa;
          score.resize(static_cast<size_t>(vis));
          for (int64_t h = 0; h < nih; ++h) wt[static_cast<size_t>(h)] = iw_[t * nih + h] * wscale;
          // Block rows are consecutive, the indexer's key after the attention's (hd) in each.
          if (vis > 0)
            kernels::indexer_scores(kernels::active_isa(), q, wt.data(), nih, ihd, kv.block(il, s.seq[t], 0) + hd,
                                    hd + ihd, vis, score.data());
          order.resize(static_cast<size_t>(vis));
          std::iota(order.begin(), order.end(), 0);
          const int64_t k = std::min(top_k, vis);
          std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
            return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)] ||
                   (score[static_cast<size_t>(a)] == score[static_cast<size_t>(b)] && a < b);
          });
          std::copy_n(order.begin(), k, &chosen_[static_cast<size_t>(t * top_k)]);
        }
      });
    }
    if (r == kCsa && s.trace_observer != nullptr && *s.trace_observer) {
      std::vector<float> ids(chosen_.begin(), chosen_.begin() + n * top_k);
      trace(s, "lid_top_k", il, ids.data(), top_k);
      trace(s, "lid_q_rot", il, iq_.data(), nih * ihd);
    }
    // Each (token, head) over its raw window and compressed keys; then the roped dims rotated back. The
    // reference concatenates the raw cells and the compressed cells into one K = V, so a key's lane in the
    // attention's sums is its cell: position p for a raw key, and after the raw cells (a multiple of 256)
    // block b's lane is b's. Here block b is column c0 + b, c0 a multiple of the widest lane count past the
    // raw columns; the columns between are masked as the reference's unused cells are.
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t ring = kv.rows(il), bw = hd + (r == kCsa ? ihd : 0);  // a block row: key (+ indexer key)
    s.pool->parallel_for(n * nh, [&](int, int64_t begin, int64_t end) {
      thread_local std::vector<AttendRun> runs;
      thread_local std::vector<int32_t> blocks;
      thread_local std::vector<uint16_t> q16;
      q16.resize(static_cast<size_t>(hd));
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = i / nh, h = i % nh, pos = s.pos[t], seq = s.seq[t];
        runs.clear();
        for (int64_t p = std::max<int64_t>(0, pos - hp_.n_swa + 1); p <= pos;) {
          const int64_t count = std::min(pos + 1 - p, ring - p % ring);  // to the ring's end
          const uint16_t* k = kv.k(il, seq, p);
          runs.push_back({p, count, k, hd, k, hd});
          p += count;
        }
        blocks.clear();
        if (r == kHca)
          for (int64_t b = 0; b < (pos + 1) / kHca; ++b) blocks.push_back(static_cast<int32_t>(b));
        if (r == kCsa) {
          for (int64_t j = 0; j < top_k; ++j)
            if (const int32_t b = chosen_[static_cast<size_t>(t * top_k + j)]; b >= 0) blocks.push_back(b);
          std::sort(blocks.begin(), blocks.end());  // the lanes sum in cell order
        }
        const int64_t c0 = (pos + kLaneAlign) / kLaneAlign * kLaneAlign;
        for (size_t j = 0; j < blocks.size(); ++j) {
          const uint16_t* k = kv.block(il, seq, blocks[j]);
          if (j > 0 && blocks[j] == blocks[j - 1] + 1)
            ++runs.back().count;  // the next block row is the next cell
          else
            runs.push_back({c0 + blocks[j], 1, k, bw, k, bw});
        }
        kernels::quantize_row(gguf::GgmlType::F16, &s.q[t * nh * hd + h * hd], q16.data(), hd);
        float* out = &s.att[t * nh * hd + h * hd];
        attend_runs(q16.data(), runs, hd, hd, scale, &L.sinks[static_cast<size_t>(h)], out);
        apply_rope(out + nope, 1, hd, -pos, rope);
      }
    });
    trace(s, "attn_derope", il, s.att.data(), nh * hd);
    // The grouped low-rank output: group g's heads through rows [g * rank, (g + 1) * rank) of wo_a.
    const int64_t groups = v4.o_groups, rank = v4.o_lora_rank, gdim = nh * hd / groups;
    grp_in_.resize(static_cast<size_t>(n * gdim));
    grp_out_.resize(static_cast<size_t>(n * rank));
    oa_.resize(static_cast<size_t>(n * groups * rank));
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t t = 0; t < n; ++t) std::copy_n(&s.att[t * nh * hd + g * gdim], gdim, &grp_in_[t * gdim]);
      kernels::MatrixView wg = L.wo_a;
      wg.rows = rank;
      wg.data = static_cast<const uint8_t*>(L.wo_a.data) + static_cast<size_t>(g * rank) * L.wo_a.row_stride;
      kernels::matmul(wg, grp_in_.data(), n, grp_out_.data(), *s.pool, s.mm);
      for (int64_t t = 0; t < n; ++t) std::copy_n(&grp_out_[t * rank], rank, &oa_[(t * groups + g) * rank]);
    }
    trace(s, "attn_wo_a", il, oa_.data(), groups * rank);
    kernels::matmul(L.wo_b, oa_.data(), n, s.out.data(), *s.pool, s.mm);
  }

  Hparams hp_;
  Dsv4Weights w_;
  RopeParams rope_plain_, rope_comp_;
  int64_t rot_ = 64;
  // Scratch, grown to the largest batch seen (never shrunk).
  std::vector<float> flat_, mixes_, post_, comb_, cur_, old_, qr_, kvp_, st_kv_, st_sc_, comp_, comp_e_, iq_, iw_;
  std::vector<float> comp_st_, idx_st_;
  std::vector<std::array<int64_t, 3>> by_pos_;  // this pass's (seq, pos, token), sorted
  std::vector<const float*> src_;
  std::vector<float> grp_in_, grp_out_, oa_;
  std::vector<int32_t> chosen_;
};

// Keys only deepseek4 has (ArchTraits::read_keys). Absent ones stay 0 (a
// header-only description reads); the architecture refuses to run without them.
void read_deepseek4_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  auto& v4 = h.dsv4;
  const int64_t all_layers = h.n_layer + h.n_layer_nextn;
  v4.hc = optional_hparam_count(f, a + keys::hyper_connection_count, 64);
  v4.hc_sinkhorn_iters = optional_hparam_count(f, a + keys::hyper_connection_sinkhorn_iterations, 1000);
  v4.hc_eps = static_cast<float>(f.get_f64_or(a + keys::hyper_connection_epsilon, 1e-6));
  v4.hash_layers = optional_hparam_count(f, a + keys::hash_layer_count, static_cast<uint64_t>(h.n_layer));
  v4.o_groups = optional_hparam_count(f, a + keys::attention_output_group_count, 4096);
  v4.o_lora_rank = optional_hparam_count(f, a + keys::attention_output_lora_rank, 1 << 20);
  v4.compress_rope_base = static_cast<float>(f.get_f64_or(a + keys::attention_compress_rope_freq_base, h.rope_base));
  v4.indexer_heads = optional_hparam_count(f, a + keys::attention_indexer_head_count, 4096);
  v4.indexer_head_dim = optional_hparam_count(f, a + keys::attention_indexer_key_length, 1 << 16);
  v4.indexer_top_k = optional_hparam_count(f, a + keys::attention_indexer_top_k, 1 << 24);
  const std::string rk = a + keys::attention_compress_ratios;
  if (f.has(rk)) {
    for (int32_t r : f.get_i32_array(rk)) {
      if (r != 0 && r != kCsa && r != kHca) bad_hparam(f, rk, "has " + std::to_string(r) + " (supported: 0, 4, 128)");
      v4.compress_ratios.push_back(r);
    }
    if (static_cast<int64_t>(v4.compress_ratios.size()) < all_layers)
      bad_hparam(f, rk, "has fewer entries than block_count");
  }
  read_swiglu_clamps(f, a, h);
}

}  // namespace

std::unique_ptr<Architecture> make_deepseek4(const Hparams& hp, TensorLoader& loader) {
  return std::make_unique<Deepseek4>(hp, loader);
}

void deepseek4_tensors(const Hparams& hp, TensorTable& t) { describe_unbound(describe, hp, t); }

// NORM rope; every layer slides (the window read from attention.sliding_window by the architecture itself).
const ArchTraits deepseek4_traits = {.default_gating = ExpertGating::sqrt_softplus, .read_keys = read_deepseek4_keys};

}  // namespace ns
