// Helpers for the kernel tests: random rows, quantize/dequantize into vectors,
// double-precision reference dots and the ISA list to run over.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/kernels.h"

namespace ns::kernels::test {

inline constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
                                      GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4,
                                      GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,
                                      GgmlType::Q1_0, GgmlType::Q2_0, GgmlType::NVFP4};

// The ggml 2026 formats whose blocks span several Q8_0 activation blocks.
inline constexpr GgmlType kMultiBlockTypes[] = {GgmlType::Q1_0, GgmlType::Q2_0, GgmlType::NVFP4};

// The K-quants (256-element super-blocks, Q8_K activations).
inline constexpr GgmlType kKQuants[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// The i-quants and ternary types (tests build their blocks from random bytes; only TQ1_0 and TQ2_0
// have a quantize_row, the others at most quantize_row_weighted).
inline constexpr GgmlType kIQuants[] = {GgmlType::IQ2_XXS, GgmlType::IQ1_S,  GgmlType::IQ1_M, GgmlType::IQ4_XS,
                                        GgmlType::IQ3_XXS, GgmlType::IQ2_XS, GgmlType::TQ2_0, GgmlType::TQ1_0,
                                        GgmlType::IQ2_S,   GgmlType::IQ3_S};

inline bool is_block_type(GgmlType t) { return gguf::traits(t).block_elems > 1; }

inline int64_t block_elems(GgmlType t) { return gguf::traits(t).block_elems; }

inline size_t row_bytes(GgmlType t, int64_t n) { return gguf::row_bytes(gguf::traits(t), static_cast<uint64_t>(n)); }

inline std::string name(GgmlType t) { return std::string(gguf::type_name(t)); }

inline std::vector<float> random_normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint8_t> quantized(GgmlType t, const float* x, int64_t n) {
  std::vector<uint8_t> out(row_bytes(t, n));
  quantize_row(t, x, out.data(), n);
  return out;
}

inline std::vector<float> dequantized(GgmlType t, const void* q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, q, out.data(), n);
  return out;
}

// Activations as vec_dot_type(weight) bytes, converted the way matmul does under isa.
inline std::vector<uint8_t> activations(GgmlType weight, Isa isa, const float* x, int64_t n) {
  std::vector<uint8_t> out(row_bytes(vec_dot_type(weight), n));
  convert_activations(weight, isa, x, out.data(), n);
  return out;
}

// Any format's reference dequantizer, activation-only ones (Q8_1, Q8_K) included.
inline std::vector<float> dequantized_any(GgmlType t, const void* q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  find_format(t)->dequantize(q, out.data(), n);
  return out;
}

struct RefDot {
  double value = 0;       // exact-ish dot of the dequantized rows
  double abs_sum = 0;     // sum of |w_i * x_i|: the scale rounding errors are measured against
  double format_gap = 0;  // what the format itself lets the kernel differ by (Q8_1's fp16 block sums)
};

inline RefDot reference_dot(GgmlType weight, const void* w, const void* x, int64_t n) {
  const GgmlType act = vec_dot_type(weight);
  const auto wf = dequantized(weight, w, n);
  const auto xf = dequantized_any(act, x, n);
  RefDot r;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(wf[static_cast<size_t>(i)]) * xf[static_cast<size_t>(i)];
    r.value += p;
    r.abs_sum += std::fabs(p);
  }
  if (act == GgmlType::Q8_1) {
    // Q4_1 / Q5_1 take their min's share as m * s, s = fp16(d_x * sum(q_x)):
    // the fp16 rounding of s is part of the format, not of the kernel.
    const size_t wbytes = gguf::traits(weight).block_bytes;
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* xq = xb + b * q8_1::kBlockBytes;
      double exact = 0;
      for (int j = 0; j < 32; ++j) exact += static_cast<int8_t>(xq[4 + j]);
      exact *= fp16_to_fp32(load_u16(xq));
      const double m = fp16_to_fp32(load_u16(wb + b * wbytes + 2));
      r.format_gap += std::fabs(m) * std::fabs(fp16_to_fp32(load_u16(xq + 2)) - exact);
    }
  }
  if (weight == GgmlType::MXFP4) {
    // Each block's d_x * d_w is one float product (ggml's order). E8M0 scales
    // reach 2^-128, so that product can fall among the float subnormals, whose
    // rounding is coarser than the accumulation bound assumes: it moves the
    // block's share by its error times the block's integer sum.
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* wq = wb + b * mxfp4::kBlockBytes;
      const uint8_t* xq = xb + b * q8_0::kBlockBytes;
      const float dx = fp16_to_fp32(load_u16(xq)), dw = mxfp4::scale(wq[0]);
      const float rounded = dx * dw;
      double sumi = 0;
      for (int j = 0; j < 16; ++j) {
        sumi += std::abs(mxfp4::kValues[wq[1 + j] & 0x0f] * static_cast<int8_t>(xq[2 + j]));
        sumi += std::abs(mxfp4::kValues[wq[1 + j] >> 4] * static_cast<int8_t>(xq[2 + 16 + j]));
      }
      r.format_gap += std::fabs(static_cast<double>(rounded) - static_cast<double>(dx) * dw) * sumi;
    }
  }
  return r;
}

// Bound on the float rounding of a kernel's sum against the exact dot: the
// longest chain of dependent float additions (per-lane blocks or elements,
// plus the final reduction) times float epsilon times the magnitude. Weight
// blocks that span several activation blocks (Q1_0, Q2_0, NVFP4) add one
// float term per activation block.
inline double accumulation_tolerance(GgmlType weight, int64_t n, double abs_sum) {
  const double eps = 0x1p-24;
  const int64_t block = std::min(gguf::traits(weight).block_elems, gguf::traits(vec_dot_type(weight)).block_elems);
  const double chain = is_block_type(weight) ? static_cast<double>(n / block) + 16 : static_cast<double>(n) / 8 + 16;
  return 2 * chain * eps * abs_sum + 1e-30;
}

inline double tolerance(GgmlType weight, int64_t n, const RefDot& ref) {
  return accumulation_tolerance(weight, n, ref.abs_sum) + ref.format_gap;
}

// Every ISA path, best last.
inline constexpr Isa kIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512};

// What each path needs, for skip messages.
inline const char* isa_needs(Isa isa) {
  return isa == Isa::avx512 ? "AVX-512 F/BW/VL/DQ + VNNI" : isa == Isa::avx2 ? "AVX2/FMA/F16C" : "nothing";
}

// The paths this CPU runs (scalar always).
inline std::vector<Isa> isas_to_test() {
  std::vector<Isa> v;
  for (const Isa isa : kIsas)
    if (isa <= detected_isa()) v.push_back(isa);
  return v;
}

// The SIMD paths this CPU runs; says which it skips.
inline std::vector<Isa> simd_isas_to_test(const char* what) {
  std::vector<Isa> v;
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa <= detected_isa()) {
      v.push_back(isa);
    } else {
      MESSAGE("skipping " << what << " under " << isa_name(isa) << ": this CPU has no " << isa_needs(isa));
    }
  }
  return v;
}

inline bool have_isa(Isa isa, const char* what) {
  if (isa <= detected_isa()) return true;
  MESSAGE("skipping " << what << ": this CPU has no " << isa_needs(isa));
  return false;
}

inline bool have_avx2(const char* what) { return have_isa(Isa::avx2, what); }

// Restores the ISA matmul uses when the test ends.
struct IsaScope {
  Isa saved = active_isa();
  explicit IsaScope(Isa isa) { set_isa(isa); }
  ~IsaScope() { set_isa(saved); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
};

}  // namespace ns::kernels::test
