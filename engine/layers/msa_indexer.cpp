#include "engine/layers/msa_indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/kernels/indexer.h"
#include "engine/state/ops.h"
#include "engine/state/sequence_state.h"
#include "engine/util/thread_pool.h"
#include "common/error.h"

namespace ns {

MsaShape msa_shape(const Hparams& hp, int64_t cache_offset) {
  const std::string a = hp.arch + ".attention.indexer.";
  const auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(ErrorKind::bad_model, hp.arch + ": metadata key '" + a + key + "' " + why);
  };
  MsaShape sh;
  sh.n_head = hp.indexer_n_head;
  sh.head_dim = hp.indexer_head_dim;
  sh.top_k = hp.indexer_top_k;
  sh.block = hp.indexer_block_size;
  sh.local = hp.indexer_local_blocks;
  if (sh.n_head <= 0) bad("head_count", "is missing or 0");
  // The reference's graph gives each GQA group its own indexer head (and asserts it).
  if (sh.n_head != hp.n_head_kv)
    bad("head_count", "is " + std::to_string(sh.n_head) + ", it must equal attention.head_count_kv (" +
                          std::to_string(hp.n_head_kv) + "): one indexer head per KV head");
  if (sh.head_dim <= 0 || sh.head_dim % 2) bad("key_length", "is missing or odd");
  if (hp.rope_dim > sh.head_dim) bad("key_length", "is shorter than rope.dimension_count (its head is roped)");
  if (sh.top_k <= 0) bad("top_k", "is missing or 0");
  if (sh.block <= 0) bad("block_size", "is missing or 0");
  if (sh.local < 0 || sh.local > sh.top_k)
    bad("local_blocks", "is " + std::to_string(sh.local) + ", it must be 0.." + std::to_string(sh.top_k) +
                            " (top_k): the forced blocks would tie for the kept places");
  sh.cache_offset = cache_offset;
  sh.norm_eps = hp.rms_eps;
  sh.rope = rope_params(hp);
  return sh;
}

void msa_tensors(TensorTable& t, const std::string& p, const MsaShape& sh, int64_t n_embd, MsaWeights& w) {
  using R = TensorRole;
  const std::string i = p + "indexer.";
  t.matrix(i + "q_proj.weight", sh.n_head * sh.head_dim, n_embd, R::input, &w.q_proj);
  t.matrix(i + "k_proj.weight", sh.head_dim, n_embd, R::input, &w.k_proj);
  t.vector(i + "q_norm.weight", sh.head_dim, R::norm, &w.q_norm);
  t.vector(i + "k_norm.weight", sh.head_dim, R::norm, &w.k_norm);
}

void msa_select(const MsaWeights& w, const MsaShape& sh, int64_t il, ForwardState& s, MsaSelection& out) {
  const int64_t n = s.n, hd = sh.head_dim, nh = sh.n_head, qw = nh * hd;
  // The calling thread's buffers (kept warm), reached by the pool's threads through these references.
  thread_local std::vector<float> q_buf, k_buf;
  std::vector<float>& q = q_buf;
  std::vector<float>& k = k_buf;
  q.resize(static_cast<size_t>(n * qw));
  k.resize(static_cast<size_t>(n * hd));
  kernels::matmul(w.q_proj, s.xn.data(), n, q.data(), *s.pool, s.mm);
  kernels::matmul(w.k_proj, s.xn.data(), n, k.data(), *s.pool, s.mm);
  SequenceState& kv = *s.seqs;
  const int64_t row = kv.k_dim();
  for (int64_t t = 0; t < n; ++t) {
    float* qt = &q[static_cast<size_t>(t * qw)];
    float* kt = &k[static_cast<size_t>(t * hd)];
    for (int64_t h = 0; h < nh; ++h) ops::rms_norm(qt + h * hd, w.q_norm.data(), hd, sh.norm_eps, qt + h * hd);
    ops::rms_norm(kt, w.k_norm.data(), hd, sh.norm_eps, kt);
    apply_rope(qt, nh, hd, s.pos[t], sh.rope);
    apply_rope(kt, 1, hd, s.pos[t], sh.rope);
    kernels::quantize_row(gguf::GgmlType::F16, kt, kv.k(il, s.seq[t], s.pos[t]) + sh.cache_offset, hd);
  }

  int64_t longest = 0;
  for (int64_t t = 0; t < n; ++t) longest = std::max<int64_t>(longest, s.pos[t] + 1);
  out.stride = longest;
  out.masks.resize(static_cast<size_t>(n * nh * longest));
  out.keep.assign(static_cast<size_t>(n * nh), nullptr);
  // The reference's scores are an F32 matmul (its gathered keys are F32 rows): ggml_vec_dot_f32's lanes per ISA.
  const kernels::Isa isa = kernels::active_isa();
  const int width = isa == kernels::Isa::avx512 ? 16 : isa == kernels::Isa::avx2 ? 8 : 0;
  s.pool->parallel_for(n * nh, [&](int, int64_t i0, int64_t i1) {
    thread_local std::vector<float> key, blocks;
    thread_local std::vector<int32_t> order;
    key.resize(static_cast<size_t>(hd));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / nh, g = i % nh, pos = s.pos[t];
      const int64_t own = pos / sh.block, n_blocks = own + 1;
      if (n_blocks <= sh.top_k) continue;  // every position: dense attention
      const float* qf = &q[static_cast<size_t>(t * qw + g * hd)];
      blocks.assign(static_cast<size_t>(n_blocks), -std::numeric_limits<float>::infinity());
      const uint16_t* k0 = kv.k(il, s.seq[t], 0) + sh.cache_offset;
      for (int64_t j = 0; j <= pos; ++j) {
        kernels::dequantize_row(gguf::GgmlType::F16, k0 + j * row, key.data(), hd);
        float dot = 0;
        if (width != 0) {
          dot = kernels::indexer_dot_lanes(key.data(), qf, hd, width);
        } else {
          for (int64_t d = 0; d < hd; ++d) dot += qf[d] * key[static_cast<size_t>(d)];
        }
        float& b = blocks[static_cast<size_t>(j / sh.block)];
        b = std::max(b, dot);
      }
      // The local blocks rank first (the reference adds 1e30 to their scores).
      for (int64_t l = 0; l < sh.local && own - l >= 0; ++l)
        blocks[static_cast<size_t>(own - l)] = std::numeric_limits<float>::infinity();
      order.resize(static_cast<size_t>(n_blocks));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + sh.top_k, order.end(), [&](int32_t a, int32_t b) {
        return blocks[static_cast<size_t>(a)] > blocks[static_cast<size_t>(b)];
      });
      uint8_t* mask = &out.masks[static_cast<size_t>(i * longest)];
      std::fill(mask, mask + pos + 1, uint8_t{0});
      for (int64_t r = 0; r < sh.top_k; ++r) {
        const int64_t b0 = order[static_cast<size_t>(r)] * sh.block;
        std::fill(mask + b0, mask + std::min(b0 + sh.block, pos + 1), uint8_t{1});
      }
      out.keep[static_cast<size_t>(i)] = mask;
    }
  });
}

}  // namespace ns
