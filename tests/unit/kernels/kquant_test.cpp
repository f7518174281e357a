// K-quants (Q2_K..Q6_K, Q8_K): the dequantizers against an independent
// transcription of ggml's element layout, and the reference quantizers'
// round-trip quality measured in quantization steps of each sub-block.
#include <algorithm>
#include <cstring>

#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

struct SubBlockGeometry {
  int elems;      // elements per sub-block
  bool has_min;   // x = d sc q - dmin m (levels 0..nmax) or x = d sc q (symmetric levels)
  double levels;  // steps across the range: nmax for min formats, 2^bits for symmetric ones
};

SubBlockGeometry geometry(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return {16, true, 3};
    case GgmlType::Q3_K: return {16, false, 8};
    case GgmlType::Q4_K: return {32, true, 15};
    case GgmlType::Q5_K: return {32, true, 31};
    default: return {16, false, 64};  // Q6_K
  }
}

// One quantization step of a sub-block: its range (including 0 for the
// formats whose min is clamped to <= 0) over the number of steps, or twice
// its largest magnitude over the number of levels for the symmetric ones.
double step_of(GgmlType t, const float* x) {
  const auto g = geometry(t);
  double lo = 0, hi = 0, amax = 0;
  for (int i = 0; i < g.elems; ++i) {
    lo = std::min(lo, static_cast<double>(x[i]));
    hi = std::max(hi, static_cast<double>(x[i]));
    amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  }
  return g.has_min ? (hi - lo) / g.levels : 2 * amax / g.levels;
}

// ggml's dequantize_row_q*_K loops (ggml-quants.c), transcribed in their own
// pointer-walking form: a second statement of the layouts to hold the
// per-element indexing of the kernels against. One super-block at a time.
float h2f(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

void ggml_loop_q2_k(const uint8_t* x, float* y) {
  const float d = h2f(x + 80), min = h2f(x + 82);
  const uint8_t* q = x + 16;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = x[is++];
      float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l] >> shift) & 3) - ml;
      sc = x[is++];
      dl = d * (sc & 0xF);
      ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16] >> shift) & 3) - ml;
      shift += 2;
    }
    q += 32;
  }
}

void ggml_loop_q3_k(const uint8_t* x, float* y) {
  const float d_all = h2f(x + 108);
  uint32_t aux[4];
  std::memcpy(aux, x + 96, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const uint8_t* q = x + 32;
  const uint8_t* hm = x;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      float dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) *y++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l)
        *y++ = dl * (static_cast<int8_t>((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
      shift += 2;
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

void ggml_loop_q4_k(const uint8_t* x, float* y) {
  const float d = h2f(x), min = h2f(x + 2);
  const uint8_t* q = x + 16;
  int is = 0;
  uint8_t sc, m;
  for (int j = 0; j < 256; j += 64) {
    get_scale_min_k4(is + 0, x + 4, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    get_scale_min_k4(is + 1, x + 4, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void ggml_loop_q5_k(const uint8_t* x, float* y) {
  const float d = h2f(x), min = h2f(x + 2);
  const uint8_t* ql = x + 48;
  const uint8_t* qh = x + 16;
  int is = 0;
  uint8_t sc, m, u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    get_scale_min_k4(is + 0, x + 4, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    get_scale_min_k4(is + 1, x + 4, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void ggml_loop_q6_k(const uint8_t* x, float* y) {
  const float d = h2f(x + 208);
  const uint8_t* ql = x;
  const uint8_t* qh = x + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int8_t q1 = static_cast<int8_t>(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      const int8_t q2 = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      const int8_t q3 = static_cast<int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      const int8_t q4 = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

TEST_CASE("K-quant dequantizers agree with ggml's loops on random super-blocks") {
  struct Case {
    GgmlType type;
    void (*loop)(const uint8_t*, float*);
    std::vector<size_t> fp16_fields;
  };
  const Case cases[] = {{GgmlType::Q2_K, ggml_loop_q2_k, {80, 82}},
                        {GgmlType::Q3_K, ggml_loop_q3_k, {108}},
                        {GgmlType::Q4_K, ggml_loop_q4_k, {0, 2}},
                        {GgmlType::Q5_K, ggml_loop_q5_k, {0, 2}},
                        {GgmlType::Q6_K, ggml_loop_q6_k, {208}}};
  std::mt19937 rng(77);
  for (const auto& c : cases) {
    CAPTURE(name(c.type));
    const size_t bytes = ns::gguf::traits(c.type).block_bytes;
    for (int trial = 0; trial < 64; ++trial) {
      std::vector<uint8_t> blk(bytes);
      for (auto& b : blk) b = static_cast<uint8_t>(rng());
      // Random finite scales (an fp16 with exponent bits all set is inf or NaN).
      for (const size_t f : c.fp16_fields) store_u16(blk.data() + f, static_cast<uint16_t>(rng() & 0xbbff));
      float expected[256];
      c.loop(blk.data(), expected);
      const auto got = dequantized(c.type, blk.data(), 256);
      for (int e = 0; e < 256; ++e) {
        if (std::memcmp(&got[static_cast<size_t>(e)], &expected[e], sizeof(float)) != 0)
          FAIL_CHECK("element " << e << ": " << got[static_cast<size_t>(e)] << " vs ggml's loop " << expected[e]);
      }
    }
  }
}

TEST_CASE("K-quant round trips: error measured in quantization steps of each sub-block") {
  const int64_t n = 256 * 32;
  std::vector<std::vector<float>> rows;
  rows.push_back(random_normal(n, 41));
  auto outliers = random_normal(n, 42);
  for (int64_t i = 0; i < n; i += 97) outliers[static_cast<size_t>(i)] *= 6;
  rows.push_back(outliers);
  auto shifted = random_normal(n, 43, 0.5f);
  for (auto& v : shifted) v += 1.0f;  // all positive: the min clamps to 0
  rows.push_back(shifted);
  for (const GgmlType t : kKQuants) {
    const auto g = geometry(t);
    for (size_t k = 0; k < rows.size(); ++k) {
      CAPTURE(name(t));
      CAPTURE(k);
      const auto& x = rows[k];
      const auto y = dequantized(t, quantized(t, x.data(), n).data(), n);
      double worst = 0, sum_sq = 0, sum_step_sq = 0;
      for (int64_t s = 0; s < n / g.elems; ++s) {
        const double step = step_of(t, x.data() + s * g.elems);
        double err_sq = 0;
        for (int i = 0; i < g.elems; ++i) {
          const double e =
              static_cast<double>(x[static_cast<size_t>(s * g.elems + i)]) - y[static_cast<size_t>(s * g.elems + i)];
          err_sq += e * e;
        }
        worst = std::max(worst, std::sqrt(err_sq / g.elems) / step);
        sum_sq += err_sq;
        sum_step_sq += step * step * g.elems;
      }
      // Rounding to a uniform grid leaves step / sqrt(12) = 0.29 steps rms;
      // the fitted scales do about that (0.25..0.29 measured), so 0.35 allows
      // for the 4- and 6-bit rounding of the sub-block scales. No sub-block
      // may lose more than 3/4 of a step (measured worst: 0.60, Q2_K with
      // outliers), far below the error of a misplaced bit or scale.
      CHECK(std::sqrt(sum_sq / sum_step_sq) <= 0.35);
      CHECK(worst <= 0.75);
    }
  }
}
