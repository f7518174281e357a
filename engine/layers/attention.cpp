#include "engine/layers/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/state/sequence_state.h"
#include "engine/state/ops.h"
#include "engine/util/thread_pool.h"

namespace ns {

void gqa_tensors(TensorTable& t, const std::string& p, const Hparams& hp, GqaWeights& w, GqaExtras* x,
                 Presence biases) {
  const int64_t d = hp.n_embd, q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  t.matrix(p + "attn_q.weight", q_dim, d, TensorRole::input, &w.wq);
  t.matrix(p + "attn_k.weight", kv_dim, d, TensorRole::input, &w.wk);
  t.matrix(p + "attn_v.weight", kv_dim, d, TensorRole::input, &w.wv);
  if (x) {
    t.vector(p + "attn_q.bias", q_dim, TensorRole::bias, &x->bq, biases);
    t.vector(p + "attn_k.bias", kv_dim, TensorRole::bias, &x->bk, biases);
    t.vector(p + "attn_v.bias", kv_dim, TensorRole::bias, &x->bv, biases);
  }
  t.matrix(p + "attn_output.weight", d, q_dim, TensorRole::residual, &w.wo);
}

void gqa_fused_qkv_tensor(TensorTable& t, const std::string& p, const Hparams& hp, GqaWeights& w) {
  t.matrix(p + "attn_qkv.weight", gqa_fused_qkv_width(hp), hp.n_embd, TensorRole::input, &w.wqkv);
}
namespace {

constexpr int kLanes = 8;  // tinyBLAS's AVX2 vector width
// Built for AVX-512 (the goldens' reference: GGML_NATIVE on an AVX-512 machine),
// tinyBLAS and soft_max work 16 lanes wide. Measured on tiny-deepseek32-kquant
// (docs/models.md, issue 34): with 8 lanes here, 1 ulp apart in 5 % of MLA's
// attended latents, which 8-bit rounding grew to flipped choices (prompt logits
// vs the reference: max 0.50, mean 0.0084); with the reference's 16, layers 0
// and 1 are equal bit for bit and the logits agree to max 0.021, mean 0.0010.
constexpr int kMaxLanes = 16;
int lane_width() { return kernels::active_isa() == kernels::Isa::avx512 ? kMaxLanes : kLanes; }

// tinyBLAS's hsum of an __m256: (hi + lo) pairwise, then movehl, then movehdup.
float lane_sum(const float* lane) {
  const float r0 = lane[0] + lane[4], r1 = lane[1] + lane[5], r2 = lane[2] + lane[6], r3 = lane[3] + lane[7];
  return (r0 + r2) + (r1 + r3);
}
// The same of `width` lanes: _mm512_reduce_add_ps adds lane i + 8 to lane i first.
float lane_sum(const float* lane, int width) {
  if (width == kLanes) return lane_sum(lane);
  float half[kLanes];
  for (int l = 0; l < kLanes; ++l) half[l] = lane[l] + lane[l + kLanes];
  return lane_sum(half);
}

// One element of tinyBLAS's F16 GEMM: lane l sums a[i] * b[i] for i = l mod
// width in order (products of halves are exact in float), then lane_sum. A
// tail shorter than the width is treated as zero padding.
float dot_lanes(const float* a, const float* b, int64_t n, int width) {
  float lane[kMaxLanes] = {};
  int64_t i = 0;
  for (; i + width <= n; i += width)
    for (int l = 0; l < width; ++l) lane[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) lane[l] += a[i + l] * b[i + l];
  return lane_sum(lane, width);
}

// scores[j] = dot_lanes(K row j, query) * scale for j < n.
void scores_scalar(const uint16_t* k_base, int64_t k_stride, const float* query, int64_t dim, int64_t n, float scale,
                   float* row, float* scores, int width) {
  for (int64_t j = 0; j < n; ++j) {
    kernels::dequantize_row(gguf::GgmlType::F16, k_base + j * k_stride, row, dim);
    scores[j] = dot_lanes(row, query, dim, width) * scale;
  }
}

// lanes[(lane0 + j) mod width][d] += V[j][d] * p[j] for j < n, in order.
void values_scalar(const uint16_t* v_base, int64_t v_stride, const uint16_t* probs, int64_t dim, int64_t n,
                   int64_t lane0, float* row, float* lanes, int width) {
  for (int64_t j = 0; j < n; ++j) {
    const float p = kernels::fp16_to_fp32(probs[j]);
    kernels::dequantize_row(gguf::GgmlType::F16, v_base + j * v_stride, row, dim);
    float* lane = lanes + ((lane0 + j) % width) * dim;
    for (int64_t d = 0; d < dim; ++d) lane[d] += row[d] * p;
  }
}

// The same two loops with F16C and FMA (dim a multiple of 8). Bit-identical to
// the scalar ones: products of halves are exact in float, so a fused
// multiply-add rounds exactly as the separate add does, and the horizontal sum
// is tinyBLAS's own.
// Keys go kKeysAtOnce at a time, one accumulator each: a key's sum is one
// chain of dependent FMAs (the reference's order), so a lone chain waits out
// the FMA latency at every step (dim / 8 steps of ~4 cycles: 288 cycles a key
// for MLA's 576-wide latent); independent chains fill that wait. Each key's
// arithmetic is unchanged.
constexpr int64_t kKeysAtOnce = 4;

__attribute__((target("avx2,fma,f16c"))) inline float hsum_avx2(__m256 acc) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

__attribute__((target("avx2,fma,f16c"))) inline __m256 load_half8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__attribute__((target("avx2,fma,f16c"))) void scores_avx2(const uint16_t* k_base, int64_t k_stride, const float* query,
                                                          int64_t dim, int64_t n, float scale, float* scores) {
  int64_t j = 0;
  for (; j + kKeysAtOnce <= n; j += kKeysAtOnce) {
    const uint16_t* k0 = k_base + j * k_stride;
    const uint16_t *k1 = k0 + k_stride, *k2 = k1 + k_stride, *k3 = k2 + k_stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < dim; i += kLanes) {
      const __m256 q = _mm256_loadu_ps(query + i);
      a0 = _mm256_fmadd_ps(load_half8(k0 + i), q, a0);
      a1 = _mm256_fmadd_ps(load_half8(k1 + i), q, a1);
      a2 = _mm256_fmadd_ps(load_half8(k2 + i), q, a2);
      a3 = _mm256_fmadd_ps(load_half8(k3 + i), q, a3);
    }
    scores[j] = hsum_avx2(a0) * scale;
    scores[j + 1] = hsum_avx2(a1) * scale;
    scores[j + 2] = hsum_avx2(a2) * scale;
    scores[j + 3] = hsum_avx2(a3) * scale;
  }
  for (; j < n; ++j) {
    const uint16_t* k = k_base + j * k_stride;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < dim; i += kLanes) acc = _mm256_fmadd_ps(load_half8(k + i), _mm256_loadu_ps(query + i), acc);
    scores[j] = hsum_avx2(acc) * scale;
  }
}

// 16 lanes (dim a multiple of 16): lanes 0-7 and 8-15 in two accumulators,
// added lane by lane before the 8-lane hsum, as _mm512_reduce_add_ps pairs them.
__attribute__((target("avx2,fma,f16c"))) void scores16_avx2(const uint16_t* k_base, int64_t k_stride,
                                                            const float* query, int64_t dim, int64_t n, float scale,
                                                            float* scores) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const uint16_t* k0 = k_base + j * k_stride;
    const uint16_t* k1 = k0 + k_stride;
    __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
    for (int64_t i = 0; i < dim; i += kMaxLanes) {
      const __m256 qa = _mm256_loadu_ps(query + i), qb = _mm256_loadu_ps(query + i + kLanes);
      a0 = _mm256_fmadd_ps(load_half8(k0 + i), qa, a0);
      b0 = _mm256_fmadd_ps(load_half8(k0 + i + kLanes), qb, b0);
      a1 = _mm256_fmadd_ps(load_half8(k1 + i), qa, a1);
      b1 = _mm256_fmadd_ps(load_half8(k1 + i + kLanes), qb, b1);
    }
    scores[j] = hsum_avx2(_mm256_add_ps(a0, b0)) * scale;
    scores[j + 1] = hsum_avx2(_mm256_add_ps(a1, b1)) * scale;
  }
  for (; j < n; ++j) {
    const uint16_t* k = k_base + j * k_stride;
    __m256 a = _mm256_setzero_ps(), b = a;
    for (int64_t i = 0; i < dim; i += kMaxLanes) {
      a = _mm256_fmadd_ps(load_half8(k + i), _mm256_loadu_ps(query + i), a);
      b = _mm256_fmadd_ps(load_half8(k + i + kLanes), _mm256_loadu_ps(query + i + kLanes), b);
    }
    scores[j] = hsum_avx2(_mm256_add_ps(a, b)) * scale;
  }
}

__attribute__((target("avx2,fma,f16c"))) void values_avx2(const uint16_t* v_base, int64_t v_stride,
                                                          const uint16_t* probs, int64_t dim, int64_t n, int64_t lane0,
                                                          float* lanes, int width) {
  for (int64_t j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(kernels::fp16_to_fp32(probs[j]));
    const uint16_t* v = v_base + j * v_stride;
    float* lane = lanes + ((lane0 + j) % width) * dim;
    for (int64_t d = 0; d < dim; d += kLanes) {
      const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d)));
      _mm256_storeu_ps(lane + d, _mm256_fmadd_ps(x, p, _mm256_loadu_ps(lane + d)));
    }
  }
}

// out[d] = lane_sum(lanes[0..7][d]) for d < dim (lanes lane-major, dim apart):
// with AVX2 eight outputs at a time, lane_sum's additions in its order.
__attribute__((target("avx2,fma,f16c"))) void reduce_lanes_avx2(const float* lanes, int64_t dim, float* out) {
  int64_t d = 0;
  for (; d + kLanes <= dim; d += kLanes) {
    const float* p = lanes + d;
    const __m256 r0 = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 4 * dim));
    const __m256 r1 = _mm256_add_ps(_mm256_loadu_ps(p + dim), _mm256_loadu_ps(p + 5 * dim));
    const __m256 r2 = _mm256_add_ps(_mm256_loadu_ps(p + 2 * dim), _mm256_loadu_ps(p + 6 * dim));
    const __m256 r3 = _mm256_add_ps(_mm256_loadu_ps(p + 3 * dim), _mm256_loadu_ps(p + 7 * dim));
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)));
  }
  for (; d < dim; ++d) {
    float lane[kLanes];
    for (int l = 0; l < kLanes; ++l) lane[l] = lanes[l * dim + d];
    out[d] = lane_sum(lane);
  }
}

// With 16 lanes, lanes 8-15 are first added into 0-7 (in place), then the 8-lane sum.
void reduce_lanes(float* lanes, int64_t dim, bool avx2, int width, float* out) {
  if (width == kMaxLanes)
    for (int64_t i = 0; i < kLanes * dim; ++i) lanes[i] += lanes[i + kLanes * dim];
  if (avx2) {
    reduce_lanes_avx2(lanes, dim, out);
    return;
  }
  for (int64_t d = 0; d < dim; ++d) {
    float lane[kLanes];
    for (int l = 0; l < kLanes; ++l) lane[l] = lanes[l * dim + d];
    out[d] = lane_sum(lane);
  }
}

// Working memory of attend_one_head, grown (never shrunk) to the largest sizes seen.
struct Scratch {
  std::vector<float> scores;    // per position: score, then exp(score - max)
  std::vector<uint16_t> probs;  // per position: F16 probability
  std::vector<float> lanes;     // [8][v_dim] partial sums of V·P, lane-major so the update is an axpy
  std::vector<float> query, row;
  std::vector<uint8_t> live;  // per column: has a row and is kept (attend_runs' gaps)
  void reserve(int64_t positions, int64_t qk_dim, int64_t v_dim) {
    grow(scores, positions);
    grow(probs, positions);
    grow(lanes, v_dim * kMaxLanes);
    grow(query, qk_dim);
    grow(row, std::max(qk_dim, v_dim));
  }
  template <class T>
  static void grow(std::vector<T>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  }
};

}  // namespace

void attend_one_head(const uint16_t* q16, const uint16_t* k_base, int64_t k_stride, const uint16_t* v_base,
                     int64_t v_stride, int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* out) {
  attend_one_head(q16, k_base, k_stride, v_base, v_stride, qk_dim, v_dim, last_pos, scale, out, AttendSpan{});
}

namespace {

// The softmax row of columns first..last (the reference's cells): `runs` hold
// the rows of the columns they cover (in column order, disjoint), the others
// are masked, as are the columns with keep[col] == 0 (keep: null = all).
// Lane = column mod width, in every sum (see the header).
void attend_core(const uint16_t* q16, const AttendRun* runs, size_t n_runs, int64_t first, int64_t last,
                 const uint8_t* keep, int64_t qk_dim, int64_t v_dim, float scale, const float* sink, float* out) {
  // Pool threads live as long as the model, so this is allocated once per thread.
  thread_local Scratch scratch;
  const int64_t n = last + 1 - first;
  scratch.reserve(n, qk_dim, v_dim);
  float* scores = scratch.scores.data();  // [i]: column first + i
  uint16_t* probs = scratch.probs.data();
  float* lanes = scratch.lanes.data();
  float* query = scratch.query.data();
  float* row = scratch.row.data();
  // Columns without a row (deepseek4's gap between its raw and compressed keys) are masked like keep's.
  int64_t covered = 0;
  for (size_t i = 0; i < n_runs; ++i) covered += runs[i].count;
  const bool gaps = covered != n;
  uint8_t* live = nullptr;
  if (gaps) {
    Scratch::grow(scratch.live, n);
    live = scratch.live.data();
    std::fill(live, live + n, uint8_t{0});
    std::fill(scores, scores + n, -INFINITY);
    for (size_t i = 0; i < n_runs; ++i)
      for (int64_t c = runs[i].col; c < runs[i].col + runs[i].count; ++c) live[c - first] = keep ? keep[c] : uint8_t{1};
  }
  const auto masked = [&](int64_t col) { return gaps ? !live[col - first] : keep && !keep[col]; };

  // kq = mul_mat(K, Q), then soft_max_ext: scale, max, ggml_vec_soft_max_f32.
  const bool avx2 = kernels::active_isa() >= kernels::Isa::avx2;
  const int width = lane_width();
  kernels::dequantize_row(gguf::GgmlType::F16, q16, query, qk_dim);
  for (size_t i = 0; i < n_runs; ++i) {
    const AttendRun& u = runs[i];
    float* sc = scores + (u.col - first);
    if (avx2 && qk_dim % width == 0 && width == kMaxLanes)
      scores16_avx2(u.k, u.k_stride, query, qk_dim, u.count, scale, sc);
    else if (avx2 && qk_dim % width == 0)
      scores_avx2(u.k, u.k_stride, query, qk_dim, u.count, scale, sc);
    else
      scores_scalar(u.k, u.k_stride, query, qk_dim, u.count, scale, row, sc, width);
  }
  if (keep || gaps)  // the masked columns leave the max; their exps are zeroed below
    for (int64_t i = 0; i < n; ++i)
      if (masked(first + i)) scores[i] = -INFINITY;
  float max = *std::max_element(scores, scores + n);
  if (sink) max = std::max(max, *sink);
  double sum = 0;
  // Groups of `width` columns from a multiple of it, as the reference's cells:
  // the masked columns before `first` and past `last` give exp(-inf) = 0.
  // 16 lanes: AVX-512's exp (ops::expf_ggml_16; lane by lane at the edges).
  for (int64_t g = first / width * width; width == kMaxLanes && g <= last; g += width) {
    float e[kMaxLanes] = {};
    if (g >= first && g + width - 1 <= last) {  // all 16 in the row: one vector exp
      float* s16 = scores + (g - first);
      for (int64_t l = 0; l < width; ++l) e[l] = s16[l] - max;
      ops::expf_ggml_16(e, e, true);
      if (keep || gaps)
        for (int64_t l = 0; l < width; ++l)
          if (masked(g + l)) e[l] = 0;
      std::copy(e, e + width, s16);
    } else {
      for (int64_t l = 0; l < width; ++l) {
        const int64_t j = g + l;
        if (j >= first && j <= last)
          e[l] = scores[j - first] = masked(j) ? 0.0f : ops::expf_ggml_512(scores[j - first] - max);
      }
    }
    sum += lane_sum(e, width);
  }
  for (int64_t g = first / kLanes * kLanes; width == kLanes && g <= last; g += kLanes) {
    float e[kLanes] = {};
    if (g >= first && g + kLanes - 1 <= last) {  // all 8 in the row: one vector exp
      float* s8 = scores + (g - first);
      for (int64_t l = 0; l < kLanes; ++l) e[l] = s8[l] - max;
      ops::expf_ggml_8(e, e, avx2);
      if (keep || gaps)
        for (int64_t l = 0; l < kLanes; ++l)
          if (masked(g + l)) e[l] = 0;
      std::copy(e, e + kLanes, s8);
    } else {
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t j = g + l;
        if (j >= first && j <= last)
          e[l] = scores[j - first] = masked(j) ? 0.0f : ops::expf_ggml(scores[j - first] - max);
      }
    }
    sum += lane_sum(e);
  }
  if (sink) sum += static_cast<double>(std::exp(*sink - max));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) probs[i] = kernels::fp32_to_fp16(scores[i] * inv);

  // kqv = mul_mat(V^T, P): lane (column mod width) of each output accumulates
  // in column order; the reference's masked columns add exact zeros.
  std::fill(lanes, lanes + v_dim * width, 0.0f);
  for (size_t i = 0; i < n_runs; ++i) {
    const AttendRun& u = runs[i];
    if (avx2 && v_dim % kLanes == 0)
      values_avx2(u.v, u.v_stride, probs + (u.col - first), v_dim, u.count, u.col, lanes, width);
    else
      values_scalar(u.v, u.v_stride, probs + (u.col - first), v_dim, u.count, u.col, row, lanes, width);
  }
  reduce_lanes(lanes, v_dim, avx2, width, out);
}

}  // namespace

void attend_one_head(const uint16_t* q16, const uint16_t* k_base, int64_t k_stride, const uint16_t* v_base,
                     int64_t v_stride, int64_t qk_dim, int64_t v_dim, int64_t last_pos, float scale, float* out,
                     const AttendSpan& span) {
  thread_local std::vector<AttendRun> runs;  // per pool thread, grown once
  runs.clear();
  // Runs of positions whose rows are contiguous (a ring wraps once at most per run).
  for (int64_t j = span.first_pos; j <= last_pos;) {
    const int64_t r = span.ring > 0 ? j % span.ring : j;
    const int64_t count = span.ring > 0 ? std::min(last_pos + 1 - j, span.ring - r) : last_pos + 1 - j;
    runs.push_back({j, count, k_base + r * k_stride, k_stride, v_base + r * v_stride, v_stride});
    j += count;
  }
  attend_core(q16, runs.data(), runs.size(), span.first_pos, last_pos, span.keep, qk_dim, v_dim, scale, span.sink, out);
}

void attend_runs(const uint16_t* q16, const std::vector<AttendRun>& runs, int64_t qk_dim, int64_t v_dim, float scale,
                 const float* sink, float* out) {
  if (runs.empty()) throw std::logic_error("attend_runs: no keys");
  attend_core(q16, runs.data(), runs.size(), runs.front().col, runs.back().col + runs.back().count - 1, nullptr, qk_dim,
              v_dim, scale, sink, out);
}

namespace {

// The part every GQA variant shares once s.q, s.k, s.v hold the rotated
// projections: K/V into the cache, each query head against its group's cached
// keys and values, then the output projection into s.out.
void attend_gqa(const kernels::MatrixView& wo, const Hparams& hp, int64_t il, ForwardState& s,
                const uint8_t* const* keep) {
  const int64_t n = s.n, hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;
  const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
  SequenceState& kv = *s.seqs;
  const int64_t k_row = kv.k_dim(), v_row = kv.v_dim();  // kv_dim, or wider (gqa_attend)
  for (int64_t t = 0; t < n; ++t) {
    kernels::quantize_row(gguf::GgmlType::F16, &s.k[t * kv_dim], kv.k(il, s.seq[t], s.pos[t]), kv_dim);
    kernels::quantize_row(gguf::GgmlType::F16, &s.v[t * kv_dim], kv.v(il, s.seq[t], s.pos[t]), kv_dim);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = n_head / n_kv;
  s.pool->parallel_for(n * n_head, [&](int thread, int64_t begin, int64_t end) {
    uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * hd];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_head, h = i % n_head, kh = h / group;
      kernels::quantize_row(gguf::GgmlType::F16, &s.q[t * q_dim + h * hd], q16, hd);
      AttendSpan span;
      if (keep != nullptr) span.keep = keep[t * n_kv + kh];
      attend_one_head(q16, kv.k(il, s.seq[t], 0) + kh * hd, k_row, kv.v(il, s.seq[t], 0) + kh * hd, v_row, hd, hd,
                      s.pos[t], scale, &s.att[t * q_dim + h * hd], span);
    }
  });
  kernels::matmul(wo, s.att.data(), n, s.out.data(), *s.pool, s.mm);
}

void project_qkv(const GqaWeights& w, const Hparams& hp, ForwardState& s) {
  if (w.wqkv.rows > 0) {
    // One product, each token's row [Q | K | V]; then K and V out to their
    // buffers and Q packed down to q_dim a row, in token order (row t's Q
    // lands at or before where it was, never over a row not yet read).
    const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
    const int64_t width = q_dim + 2 * kv_dim;
    kernels::matmul(w.wqkv, s.xn.data(), s.n, s.q.data(), *s.pool, s.mm);
    for (int64_t t = 0; t < s.n; ++t) {
      const float* row = &s.q[t * width];
      std::copy(row + q_dim, row + q_dim + kv_dim, &s.k[t * kv_dim]);
      std::copy(row + q_dim + kv_dim, row + width, &s.v[t * kv_dim]);
      if (t > 0) std::copy(row, row + q_dim, &s.q[t * q_dim]);  // forward copy: the target starts before the source
    }
    return;
  }
  kernels::matmul(w.wq, s.xn.data(), s.n, s.q.data(), *s.pool, s.mm);
  kernels::matmul(w.wk, s.xn.data(), s.n, s.k.data(), *s.pool, s.mm);
  kernels::matmul(w.wv, s.xn.data(), s.n, s.v.data(), *s.pool, s.mm);
}

void add_bias(float* rows, const std::vector<float>& b, int64_t n, int64_t width) {
  if (b.empty()) return;
  for (int64_t t = 0; t < n; ++t) ops::add(rows + t * width, b.data(), width);
}

// RMS norm of each w.size() floats of the n rows of `width`: a head at a time
// for a [head_dim] weight, the whole row for a [width] one (minimax-m2).
void norm_spans(float* rows, const std::vector<float>& w, int64_t n, int64_t width, float eps) {
  if (w.empty()) return;
  const int64_t span = static_cast<int64_t>(w.size());
  for (int64_t i = 0; i < n * width / span; ++i) ops::rms_norm(rows + i * span, w.data(), span, eps, rows + i * span);
}

}  // namespace

void gqa_attention(const GqaWeights& w, const Hparams& hp, int64_t il, ForwardState& s) {
  const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;
  const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
  project_qkv(w, hp, s);
  for (int64_t t = 0; t < s.n; ++t) {
    ops::rope(&s.q[t * q_dim], n_head, hd, hp.rope_dim, s.pos[t], hp.rope_base, hp.rope_freq_scale, hp.rope_type);
    ops::rope(&s.k[t * kv_dim], n_kv, hd, hp.rope_dim, s.pos[t], hp.rope_base, hp.rope_freq_scale, hp.rope_type);
  }
  attend_gqa(w.wo, hp, il, s, nullptr);
}

void gqa_attention(const GqaWeights& w, const GqaExtras& x, const Hparams& hp, const RopeParams& rope, int64_t il,
                   ForwardState& s) {
  gqa_project(w, x, hp, rope, s);
  attend_gqa(w.wo, hp, il, s, nullptr);
}

void gqa_attend(const kernels::MatrixView& wo, const Hparams& hp, int64_t il, ForwardState& s,
                const uint8_t* const* keep) {
  attend_gqa(wo, hp, il, s, keep);
}

void gqa_project(const GqaWeights& w, const GqaExtras& x, const Hparams& hp, const RopeParams& rope, ForwardState& s) {
  const int64_t n = s.n, hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;
  const int64_t q_dim = n_head * hd, kv_dim = n_kv * hd;
  project_qkv(w, hp, s);
  add_bias(s.q.data(), x.bq, n, q_dim);
  add_bias(s.k.data(), x.bk, n, kv_dim);
  add_bias(s.v.data(), x.bv, n, kv_dim);
  norm_spans(s.q.data(), x.q_norm, n, q_dim, hp.rms_eps);
  norm_spans(s.k.data(), x.k_norm, n, kv_dim, hp.rms_eps);
  for (int64_t t = 0; t < n; ++t) {
    apply_rope(&s.q[t * q_dim], n_head, hd, s.pos[t], rope);
    apply_rope(&s.k[t * kv_dim], n_kv, hd, s.pos[t], rope);
  }
}

void attend_cached(const float* q, int64_t q_stride, int64_t q_head_stride, int64_t n_head, int64_t n_kv, int64_t hd,
                   float scale, int64_t il, ForwardState& s, float* out) {
  SequenceState& kv = *s.seqs;
  const int64_t kv_dim = n_kv * hd, group = n_head / n_kv;
  const size_t slot = s.q16.size() / static_cast<size_t>(s.pool->size());
  s.pool->parallel_for(s.n * n_head, [&](int thread, int64_t begin, int64_t end) {
    uint16_t* q16 = &s.q16[static_cast<size_t>(thread) * slot];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_head, h = i % n_head, kh = h / group;
      kernels::quantize_row(gguf::GgmlType::F16, q + t * q_stride + h * q_head_stride, q16, hd);
      attend_one_head(q16, kv.k(il, s.seq[t], 0) + kh * hd, kv_dim, kv.v(il, s.seq[t], 0) + kh * hd, kv_dim, hd, hd,
                      s.pos[t], scale, out + t * n_head * hd + h * hd);
    }
  });
}

}  // namespace ns
