#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/layers/attention.h"
#include "engine/state/ops.h"

using namespace ns;

namespace {

std::vector<uint16_t> random_halves(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> h(n);
  for (auto& x : h) x = kernels::fp32_to_fp16(dist(rng));
  return h;
}

}  // namespace

TEST_CASE("attention over one position returns the cached value row exactly") {
  std::mt19937 rng(1);
  const int64_t dim = 32;
  auto q = random_halves(rng, dim, 1.0f), k = random_halves(rng, dim, 1.0f), v = random_halves(rng, dim, 1.0f);
  std::vector<float> out(dim);
  attend_one_head(q.data(), k.data(), dim, v.data(), dim, dim, dim, 0, 0.17f, out.data());
  for (int64_t d = 0; d < dim; ++d) CHECK(out[d] == kernels::fp16_to_fp32(v[d]));
}

TEST_CASE("attention agrees with a double-precision softmax within F16 rounding") {
  std::mt19937 rng(2);
  // Strided rows (two heads interleaved) and a head size that is not a multiple of 8.
  for (const int64_t dim : {int64_t{32}, int64_t{64}, int64_t{20}}) {
    const int64_t n_pos = 77, stride = 2 * dim;
    auto q = random_halves(rng, dim, 1.0f), k = random_halves(rng, n_pos * stride, 1.0f),
         v = random_halves(rng, n_pos * stride, 1.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    for (const int64_t last : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{40}, n_pos - 1}) {
      std::vector<float> out(dim);
      attend_one_head(q.data(), k.data() + dim, stride, v.data() + dim, stride, dim, dim, last, scale, out.data());
      std::vector<double> p(last + 1);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double s = 0;
        for (int64_t d = 0; d < dim; ++d)
          s += double(kernels::fp16_to_fp32(q[d])) * kernels::fp16_to_fp32(k[j * stride + dim + d]);
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      for (auto& x : p) sum += (x = std::exp(x - mx));
      for (int64_t d = 0; d < dim; ++d) {
        double ref = 0;
        for (int64_t j = 0; j <= last; ++j) ref += p[j] / sum * kernels::fp16_to_fp32(v[j * stride + dim + d]);
        CAPTURE(dim);
        CAPTURE(last);
        CHECK(std::fabs(out[d] - ref) < 2e-3);
      }
    }
  }
}

TEST_CASE("attention output does not depend on values past the last position") {
  std::mt19937 rng(3);
  const int64_t dim = 32, n_pos = 20;
  auto q = random_halves(rng, dim, 1.0f), k = random_halves(rng, n_pos * dim, 1.0f),
       v = random_halves(rng, n_pos * dim, 1.0f);
  std::vector<float> a(dim), b(dim);
  attend_one_head(q.data(), k.data(), dim, v.data(), dim, dim, dim, 10, 0.2f, a.data());
  for (int64_t i = 11 * dim; i < n_pos * dim; ++i) k[i] = v[i] = kernels::fp32_to_fp16(1000.0f);
  attend_one_head(q.data(), k.data(), dim, v.data(), dim, dim, dim, 10, 0.2f, b.data());
  CHECK(a == b);
}

TEST_CASE("attention: the AVX2 path is bit-identical to the scalar reference") {
  std::mt19937 rng(4);
  const kernels::Isa saved = kernels::active_isa();
  // 576: MLA's latent keys (kv_lora 512 + rope 64); lasts cover key counts
  // below, at and past multiples of the keys scored at once (4).
  for (const int64_t dim : {int64_t{32}, int64_t{128}, int64_t{20}, int64_t{576}}) {
    const int64_t n_pos = 300, stride = 3 * dim;
    auto q = random_halves(rng, dim, 2.0f), k = random_halves(rng, n_pos * stride, 2.0f),
         v = random_halves(rng, n_pos * stride, 1.0f);
    for (const int64_t last : {int64_t{0}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{63}, n_pos - 1}) {
      std::vector<float> scalar(dim), avx2(dim);
      kernels::set_isa(kernels::Isa::scalar);
      attend_one_head(q.data(), k.data() + dim, stride, v.data() + dim, stride, dim, dim, last, 0.1f, scalar.data());
      kernels::set_isa(kernels::Isa::avx2);  // clamped to scalar where the CPU lacks AVX2
      attend_one_head(q.data(), k.data() + dim, stride, v.data() + dim, stride, dim, dim, last, 0.1f, avx2.data());
      CAPTURE(dim);
      CAPTURE(last);
      CHECK(scalar == avx2);
    }
  }
  kernels::set_isa(saved);
}

// gpt-oss's attention: a window (first_pos), a per-head sink logit and a ring
// of rows, against a double-precision softmax over the window plus the sink;
// the ring layout and the AVX2 path give the contiguous scalar result bit for bit.
TEST_CASE("attention over a window with a sink, in a ring of rows") {
  std::mt19937 rng(5);
  const kernels::Isa saved = kernels::active_isa();
  for (const int64_t dim : {int64_t{32}, int64_t{20}}) {
    const int64_t n_pos = 90, ring = 24;
    auto q = random_halves(rng, dim, 1.0f), k = random_halves(rng, n_pos * dim, 1.0f),
         v = random_halves(rng, n_pos * dim, 1.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    for (const float sink : {-2.0f, 0.5f, 3.0f}) {
      for (const auto& [first, last] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {3, 14}, {13, 24}, {70, 89}}) {
        CAPTURE(dim);
        CAPTURE(sink);
        CAPTURE(first);
        CAPTURE(last);
        AttendSpan span;
        span.first_pos = first;
        span.sink = &sink;
        std::vector<float> out(dim), scalar(dim), ringed(dim);
        kernels::set_isa(kernels::Isa::scalar);
        attend_one_head(q.data(), k.data(), dim, v.data(), dim, dim, dim, last, scale, scalar.data(), span);
        kernels::set_isa(kernels::Isa::avx2);  // the 8-lane order either way (AVX-512's 16: the test below)
        attend_one_head(q.data(), k.data(), dim, v.data(), dim, dim, dim, last, scale, out.data(), span);
        CHECK(out == scalar);
        // The same positions in a ring of 24 rows (position j at row j mod 24).
        if (last - first < ring) {
          std::vector<uint16_t> kr(static_cast<size_t>(ring * dim)), vr(static_cast<size_t>(ring * dim));
          for (int64_t j = first; j <= last; ++j)
            for (int64_t d = 0; d < dim; ++d) {
              kr[(j % ring) * dim + d] = k[j * dim + d];
              vr[(j % ring) * dim + d] = v[j * dim + d];
            }
          AttendSpan rs = span;
          rs.ring = ring;
          attend_one_head(q.data(), kr.data(), dim, vr.data(), dim, dim, dim, last, scale, ringed.data(), rs);
          CHECK(ringed == out);
        }
        // Double precision: softmax over the window and the sink; the sink has no value.
        double mx = sink, sum = 0;
        std::vector<double> p(static_cast<size_t>(last + 1), 0.0);
        for (int64_t j = first; j <= last; ++j) {
          double s = 0;
          for (int64_t d = 0; d < dim; ++d)
            s += double(kernels::fp16_to_fp32(q[d])) * kernels::fp16_to_fp32(k[j * dim + d]);
          mx = std::max(mx, p[j] = s * scale);
        }
        for (int64_t j = first; j <= last; ++j) sum += (p[j] = std::exp(p[j] - mx));
        sum += std::exp(double(sink) - mx);
        for (int64_t d = 0; d < dim; ++d) {
          double ref = 0;
          for (int64_t j = first; j <= last; ++j) ref += p[j] / sum * kernels::fp16_to_fp32(v[j * dim + d]);
          CHECK(std::fabs(out[d] - ref) < 2e-3);
        }
      }
    }
  }
  kernels::set_isa(saved);
  // No sink, first_pos 0, no ring: the plain causal attention, bit for bit.
  auto q = random_halves(rng, 32, 1.0f), k = random_halves(rng, 40 * 32, 1.0f), v = random_halves(rng, 40 * 32, 1.0f);
  std::vector<float> a(32), b(32);
  attend_one_head(q.data(), k.data(), 32, v.data(), 32, 32, 32, 39, 0.2f, a.data());
  attend_one_head(q.data(), k.data(), 32, v.data(), 32, 32, 32, 39, 0.2f, b.data(), AttendSpan{});
  CHECK(a == b);
}

// On AVX-512 the sums run 16 lanes wide, as the reference built there
// (tinyBLAS's F16 products, soft_max through the AVX-512 exp; issue 34): the
// same result bit for bit as this plain emulation of that order.
namespace {
float lane_sum16(const float* v) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = v[i] + v[i + 8];  // _mm512_reduce_add_ps: lane i + 8 into lane i
  return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

std::vector<float> attend16(const std::vector<uint16_t>& q, const uint16_t* k, const uint16_t* v, int64_t stride,
                            int64_t dim, int64_t first, int64_t last, float scale, const float* sink) {
  std::vector<float> scores(static_cast<size_t>(last + 1), 0.0f);
  for (int64_t j = first; j <= last; ++j) {
    float lane[16] = {};
    for (int64_t i = 0; i < dim; ++i)
      lane[i % 16] += kernels::fp16_to_fp32(k[j * stride + i]) * kernels::fp16_to_fp32(q[static_cast<size_t>(i)]);
    scores[static_cast<size_t>(j)] = lane_sum16(lane) * scale;
  }
  float mx = sink ? *sink : -INFINITY;
  for (int64_t j = first; j <= last; ++j) mx = std::max(mx, scores[static_cast<size_t>(j)]);
  double sum = 0;
  for (int64_t g = first / 16 * 16; g <= last; g += 16) {
    float e[16] = {};
    for (int64_t l = 0; l < 16; ++l)
      if (g + l >= first && g + l <= last)
        e[l] = scores[static_cast<size_t>(g + l)] = ops::expf_ggml_512(scores[static_cast<size_t>(g + l)] - mx);
    sum += lane_sum16(e);
  }
  if (sink) sum += static_cast<double>(std::exp(*sink - mx));
  const float inv = static_cast<float>(1.0 / sum);
  std::vector<float> lanes(static_cast<size_t>(16 * dim), 0.0f), out(static_cast<size_t>(dim));
  for (int64_t j = first; j <= last; ++j) {
    const float p = kernels::fp16_to_fp32(kernels::fp32_to_fp16(scores[static_cast<size_t>(j)] * inv));
    float* lane = &lanes[static_cast<size_t>((j % 16) * dim)];
    for (int64_t d = 0; d < dim; ++d) lane[d] += kernels::fp16_to_fp32(v[j * stride + d]) * p;
  }
  for (int64_t d = 0; d < dim; ++d) {
    float l16[16];
    for (int l = 0; l < 16; ++l) l16[l] = lanes[static_cast<size_t>(l * dim + d)];
    out[static_cast<size_t>(d)] = lane_sum16(l16);
  }
  return out;
}
}  // namespace

TEST_CASE("attention on AVX-512 sums in the reference's 16-lane order") {
  const kernels::Isa saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::avx512);
  if (kernels::active_isa() != kernels::Isa::avx512) {
    kernels::set_isa(saved);
    MESSAGE("skipped: this CPU has no AVX-512");
    return;
  }
  std::mt19937 rng(6);
  for (const int64_t dim : {int64_t{32}, int64_t{80}, int64_t{20}, int64_t{576}}) {
    const int64_t n_pos = 150, stride = 2 * dim;
    auto q = random_halves(rng, dim, 2.0f), k = random_halves(rng, n_pos * stride, 2.0f),
         v = random_halves(rng, n_pos * stride, 1.0f);
    const float sink = 0.7f;
    const std::vector<std::pair<int64_t, int64_t>> spans = {{0, 0}, {0, 15}, {0, 16}, {0, 149}, {5, 40}};
    for (const auto& [first, last] : spans) {
      for (const bool with_sink : {false, true}) {
        AttendSpan span;
        span.first_pos = first;
        span.sink = with_sink ? &sink : nullptr;
        std::vector<float> out(static_cast<size_t>(dim));
        attend_one_head(q.data(), k.data() + dim, stride, v.data() + dim, stride, dim, dim, last, 0.1f, out.data(),
                        span);
        CAPTURE(dim);
        CAPTURE(first);
        CAPTURE(last);
        CHECK(out == attend16(q, k.data() + dim, v.data() + dim, stride, dim, first, last, 0.1f, span.sink));
      }
    }
  }
  kernels::set_isa(saved);
}

// deepseek4's row (attend_runs): raw keys in a ring, then compressed blocks at
// columns past a gap, in rows of another stride. The same bits as one
// contiguous row of those columns where the gap and the unselected blocks are
// masked (keep), on every ISA path.
TEST_CASE("attention over runs of rows with gaps equals the masked contiguous row") {
  std::mt19937 rng(21);
  const kernels::Isa saved = kernels::active_isa();
  const int64_t dim = 64, n_col = 70, raw_first = 9, raw_last = 20, c0 = 32, bw = dim + 16;
  const std::vector<int64_t> blocks = {0, 1, 2, 5, 7, 8, 30, 37};  // selected, in order; column c0 + b
  auto q = random_halves(rng, dim, 1.0f), all = random_halves(rng, n_col * dim, 1.0f);
  std::vector<uint8_t> keep(static_cast<size_t>(n_col), 0);
  const int64_t ring = 16;  // the raw rows in a ring of 16 (positions 9..20 wrap it)
  std::vector<uint16_t> raw(static_cast<size_t>(ring * dim)), comp(static_cast<size_t>(40 * bw));
  std::vector<AttendRun> runs;
  for (int64_t p = raw_first; p <= raw_last; ++p) keep[static_cast<size_t>(p)] = 1;
  for (int64_t b : blocks) {
    keep[static_cast<size_t>(c0 + b)] = 1;
    std::copy_n(&all[static_cast<size_t>((c0 + b) * dim)], dim, &comp[static_cast<size_t>(b * bw)]);
  }
  for (int64_t p = raw_first; p <= raw_last;) {
    const int64_t count = std::min(raw_last + 1 - p, ring - p % ring);
    for (int64_t j = p; j < p + count; ++j)
      std::copy_n(&all[static_cast<size_t>(j * dim)], dim, &raw[static_cast<size_t>(j % ring * dim)]);
    runs.push_back(
        {p, count, &raw[static_cast<size_t>(p % ring * dim)], dim, &raw[static_cast<size_t>(p % ring * dim)], dim});
    p += count;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const uint16_t* row = &comp[static_cast<size_t>(blocks[i] * bw)];
    if (i > 0 && blocks[i] == blocks[i - 1] + 1)
      ++runs.back().count;
    else
      runs.push_back({c0 + blocks[i], 1, row, bw, row, bw});
  }
  const float sink = 0.3f;
  for (const kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512}) {
    kernels::set_isa(isa);  // clamped to what the CPU has
    AttendSpan span;
    span.first_pos = raw_first;
    span.keep = keep.data();
    span.sink = &sink;
    std::vector<float> masked(dim), got(dim);
    attend_one_head(q.data(), all.data(), dim, all.data(), dim, dim, dim, c0 + blocks.back(), 0.125f, masked.data(),
                    span);
    attend_runs(q.data(), runs, dim, dim, 0.125f, &sink, got.data());
    CAPTURE(kernels::isa_name(kernels::active_isa()));
    CHECK(got == masked);
  }
  kernels::set_isa(saved);
}
