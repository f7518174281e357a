#include "engine/layers/dsa_indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/kernels/indexer.h"
#include "engine/state/sequence_state.h"
#include "engine/state/trace.h"
#include "engine/util/thread_pool.h"
#include "common/error.h"

namespace ns {

DsaShape dsa_shape(const Hparams& hp, int64_t cache_offset) {
  const std::string a = hp.arch + ".attention.indexer.";
  const auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(ErrorKind::bad_model, hp.arch + ": metadata key '" + a + key + "' " + why);
  };
  DsaShape sh;
  sh.n_head = hp.indexer_n_head;
  sh.head_dim = hp.indexer_head_dim;
  sh.top_k = hp.indexer_top_k;
  if (sh.n_head <= 0) bad("head_count", "is missing or 0");
  if (sh.top_k <= 0) bad("top_k", "is missing or 0");
  // The reference rotates the cached keys by a Walsh-Hadamard matrix of the
  // largest power of two from 64 up dividing the key length.
  if (sh.head_dim < 64 || sh.head_dim % 64) bad("key_length", "must be a positive multiple of 64");
  if (hp.rope_dim > sh.head_dim) bad("key_length", "is shorter than rope.dimension_count (its head starts roped)");
  sh.hadamard_block = 64;
  while (sh.head_dim % (2 * sh.hadamard_block) == 0) sh.hadamard_block *= 2;
  sh.cache_offset = cache_offset;
  sh.norm_eps = hp.indexer_norm_eps;
  sh.weight_scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim * sh.n_head));
  sh.rope = rope_params(hp);
  sh.rope.type = hp.indexer_rope_type;
  return sh;
}

void dsa_tensors(TensorTable& t, const std::string& p, const DsaShape& sh, int64_t n_embd, int64_t q_lora,
                 Presence presence, DsaWeights& w) {
  using R = TensorRole;
  const std::string i = p + "indexer.";
  t.vector(i + "k_norm.weight", sh.head_dim, R::norm, &w.k_norm, presence);
  t.vector(i + "k_norm.bias", sh.head_dim, R::bias, &w.k_norm_b, presence);
  t.matrix(i + "proj.weight", sh.n_head, n_embd, R::input, &w.proj, presence);
  t.matrix(i + "attn_k.weight", sh.head_dim, n_embd, R::input, &w.k, presence);
  t.matrix(i + "attn_q_b.weight", sh.n_head * sh.head_dim, q_lora, R::input, &w.q_b, presence);
}

void hadamard_rotate(float* v, int64_t n) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) v[i] *= scale;
  for (int64_t len = 1; len < n; len <<= 1)
    for (int64_t i = 0; i < n; i += 2 * len)
      for (int64_t j = i; j < i + len; ++j) {
        const float u = v[j], x = v[j + len];
        v[j] = u + x;
        v[j + len] = u - x;
      }
}

namespace {

// ggml_norm: the mean and the variance summed in double, scaled by
// 1/sqrt(variance + eps); then the weight and the bias.
void layer_norm(float* x, const float* w, const float* b, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] -= mean;
    sum2 += static_cast<double>(x[i]) * x[i];
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * scale * w[i] + b[i];
}

// rope over each head's first dims, then the rotation block by block.
void rope_rotate(float* v, int64_t n_head, const DsaShape& sh, int64_t pos) {
  apply_rope(v, n_head, sh.head_dim, pos, sh.rope);
  for (int64_t o = 0; o < n_head * sh.head_dim; o += sh.hadamard_block) hadamard_rotate(v + o, sh.hadamard_block);
}

}  // namespace

void dsa_select(const DsaWeights& w, const DsaShape& sh, int64_t il, const float* q_a, ForwardState& s,
                DsaSelection& out) {
  const int64_t n = s.n, hd = sh.head_dim, nh = sh.n_head, qw = nh * hd;
  // The calling thread's buffers (kept warm), reached by the pool's threads through these references.
  thread_local std::vector<float> q_buf, k_buf, w_buf;
  std::vector<float>& q = q_buf;
  std::vector<float>& k = k_buf;
  std::vector<float>& wt = w_buf;
  q.resize(static_cast<size_t>(n * qw));
  k.resize(static_cast<size_t>(n * hd));
  wt.resize(static_cast<size_t>(n * nh));
  kernels::matmul(w.q_b, q_a, n, q.data(), *s.pool, s.mm);
  kernels::matmul(w.k, s.xn.data(), n, k.data(), *s.pool, s.mm);
  kernels::matmul(w.proj, s.xn.data(), n, wt.data(), *s.pool, s.mm);
  SequenceState& kv = *s.seqs;
  const int64_t row = kv.k_dim();
  for (int64_t t = 0; t < n; ++t) {
    float* kt = &k[static_cast<size_t>(t * hd)];
    layer_norm(kt, w.k_norm.data(), w.k_norm_b.data(), hd, sh.norm_eps);
    rope_rotate(kt, 1, sh, s.pos[t]);
    rope_rotate(&q[static_cast<size_t>(t * qw)], nh, sh, s.pos[t]);
    for (int64_t h = 0; h < nh; ++h) wt[static_cast<size_t>(t * nh + h)] *= sh.weight_scale;
    kernels::quantize_row(gguf::GgmlType::F16, kt, kv.k(il, s.seq[t], s.pos[t]) + sh.cache_offset, hd);
  }

  int64_t longest = 0;
  for (int64_t t = 0; t < n; ++t) longest = std::max<int64_t>(longest, s.pos[t] + 1);
  out.stride = longest;
  out.masks.resize(static_cast<size_t>(n * longest));
  out.keep.assign(static_cast<size_t>(n), nullptr);
  const kernels::Isa isa = kernels::active_isa();
  if (s.trace_observer != nullptr && *s.trace_observer) {  // every token's scores, as the reference's indexer_score
    std::vector<float> all(static_cast<size_t>(n * longest), -std::numeric_limits<float>::infinity());
    for (int64_t t = 0; t < n; ++t)
      kernels::indexer_scores(isa, &q[static_cast<size_t>(t * qw)], &wt[static_cast<size_t>(t * nh)], nh, hd,
                              kv.k(il, s.seq[t], 0) + sh.cache_offset, row, s.pos[t] + 1, &all[t * longest]);
    trace(s, "indexer_score", il, all.data(), longest);
  }
  // One token (a decode step): its keys are split over the threads; a batch goes token by token.
  thread_local std::vector<float> one_buf;
  std::vector<float>& one = one_buf;
  const bool split_keys = n == 1 && s.pos[0] + 1 > sh.top_k;
  if (split_keys) {
    one.resize(static_cast<size_t>(s.pos[0] + 1));
    const uint16_t* k0 = kv.k(il, s.seq[0], 0) + sh.cache_offset;
    s.pool->parallel_for(s.pos[0] + 1, [&](int, int64_t j0, int64_t j1) {
      kernels::indexer_scores(isa, q.data(), wt.data(), nh, hd, k0 + j0 * row, row, j1 - j0, one.data() + j0);
    });
  }
  s.pool->parallel_for(n, [&](int, int64_t t0, int64_t t1) {
    thread_local std::vector<float> scores_buf;
    thread_local std::vector<int32_t> order;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t keys = s.pos[t] + 1;
      if (keys <= sh.top_k) continue;  // every position: dense MLA
      std::vector<float>& scores = split_keys ? one : scores_buf;
      if (!split_keys) {
        scores.resize(static_cast<size_t>(keys));
        kernels::indexer_scores(isa, &q[static_cast<size_t>(t * qw)], &wt[static_cast<size_t>(t * nh)], nh, hd,
                                kv.k(il, s.seq[t], 0) + sh.cache_offset, row, keys, scores.data());
      }
      order.resize(static_cast<size_t>(keys));
      std::iota(order.begin(), order.end(), 0);
      // Equal scores (exact zeros, where every head's product is negative, are
      // common) are chosen as the reference's top_k op chooses them: a partial
      // sort of the positions in order by "greater score" alone, whose ties
      // libstdc++'s heap selection settles. Its masked positions (-inf, past
      // pos) never enter the heap, so the cache's padding changes nothing.
      std::partial_sort(order.begin(), order.begin() + sh.top_k, order.end(), [&](int32_t a, int32_t b) {
        return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)];
      });
      uint8_t* mask = &out.masks[static_cast<size_t>(t * longest)];
      std::fill(mask, mask + keys, uint8_t{0});
      for (int64_t i = 0; i < sh.top_k; ++i) mask[order[static_cast<size_t>(i)]] = 1;
      out.keep[static_cast<size_t>(t)] = mask;
    }
  });
}

}  // namespace ns
