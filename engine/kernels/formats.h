// The kernel files of each format, one namespace per file (the K-quants'
// SIMD namespaces are defined together in kquant_avx2.cpp and
// kquant_avx512.cpp, a decoder each in kquant_avx2.h). Adding a format
// means one <format>.cpp (scalar reference), optionally one <format>_avx2.cpp
// and one <format>_avx512.cpp, their names in this file's tables and one row in dispatch.cpp's table. A format that
// only ever holds activations (Q8_K, for the K-quants) is a row whose vec_dot
// is null: matmul finds its quantizers, is_supported() says no.
//
// Block layouts are ggml's (ggml-common.h), little-endian, packed:
//   Q8_0: fp16 d, int8 q[32];                        x[j] = d * q[j]
//   Q4_0: fp16 d, uint8 qs[16]; element j < 16 in the low nibble of qs[j],
//         element j + 16 in its high nibble;          x[j] = d * (nibble - 8)
//   Q4_1: fp16 d, fp16 m, qs[16] as Q4_0;             x[j] = d * nibble + m
//   Q5_0: fp16 d, uint32 qh, qs[16] as Q4_0; bit j of qh is element j's
//         fifth bit;                                  x[j] = d * (q - 16)
//   Q5_1: fp16 d, fp16 m, qh, qs as Q5_0;             x[j] = d * q + m
//   Q8_1: fp16 d, fp16 s = d * sum(q), int8 q[32];    x[j] = d * q
//   IQ4_NL: fp16 d, qs[16] as Q4_0;                   x[j] = d * iq4_nl::kValues[nibble]
//   MXFP4: E8M0 e, qs[16] as Q4_0;                    x[j] = mxfp4::scale(e) * mxfp4::kValues[nibble]
//   Q1_0 (128 elements): fp16 d, uint8 qs[16]; bit j % 8 of qs[j / 8] is
//         element j's sign;                           x[j] = bit ? d : -d
//   Q2_0 (64 elements): fp16 d, uint8 qs[16]; bits 2 (j % 4) of qs[j / 4];
//                                                     x[j] = d * (q - 1)
//   NVFP4 (64 elements): UE4M3 e[4], one per 16-element sub-block s, then
//         qs[32]; sub-block s's element j < 8 in the low nibble of qs[8 s + j],
//         element j + 8 in its high nibble;           x = nvfp4::scale(e[s]) * mxfp4::kValues[nibble]
//   Q2_K..Q6_K, Q8_K: 256-element super-blocks, see kquant.h.
//   IQ2_XXS, IQ1_S, ...: 256-element super-blocks on grids, see iquant.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/format.h"

namespace ns::kernels {

// Each kernel file's declarations, from one table per role. A file's
// namespace is its name: q4_k.cpp defines q4_k (the scalar reference),
// q4_k_avx2 and q4_k_avx512 its SIMD kernels; dispatch.cpp's table puts them
// in a row (with the format a vec_dot's x is in) and dispatch_test checks
// every block size against the GGUF type table.

// Block formats: namespace, elements per block, bytes per block (the layouts
// above, kquant.h and iquant.h).
// clang-format off
#define NS_KERNELS_BLOCK_SIZES(X)       \
  X(q8_0, 32, 2 + 32)                   \
  X(q4_0, 32, 2 + 16)                   \
  X(q8_1, 32, 2 + 2 + 32)               \
  X(q4_1, 32, 2 + 2 + 16)               \
  X(q5_0, 32, 2 + 4 + 16)               \
  X(q5_1, 32, 2 + 2 + 4 + 16)           \
  X(iq4_nl, 32, 2 + 16)                 \
  X(mxfp4, 32, 1 + 16)                  \
  X(q1_0, 128, 2 + 16)                  \
  X(q2_0, 64, 2 + 16)                   \
  X(nvfp4, 64, 4 + 32)                  \
  X(q8_k, 256, 4 + 256 + 2 * 16)        \
  X(q2_k, 256, 16 + 64 + 2 + 2)         \
  X(q3_k, 256, 32 + 64 + 12 + 2)        \
  X(q4_k, 256, 2 + 2 + 12 + 128)        \
  X(q5_k, 256, 2 + 2 + 12 + 32 + 128)   \
  X(q6_k, 256, 128 + 64 + 16 + 2)       \
  X(iq2_xxs, 256, 2 + 64)               \
  X(iq1_s, 256, 2 + 32 + 16)            \
  X(iq1_m, 256, 32 + 16 + 8)            \
  X(iq4_xs, 256, 2 + 2 + 4 + 128)       \
  X(iq3_xxs, 256, 2 + 64 + 32)          \
  X(iq2_xs, 256, 2 + 64 + 8)            \
  X(tq2_0, 256, 64 + 2)                 \
  X(tq1_0, 256, 48 + 4 + 2)             \
  X(iq2_s, 256, 2 + 32 + 32 + 8 + 8)    \
  X(iq3_s, 256, 2 + 64 + 8 + 32 + 4)

// The scalar references: every format's dequantize; quantize, except the
// read-only i-quants (quantize_row refuses them; tools/quantize/iq_quantize.h
// has their importance-weighted quantizers); vec_dot, except the activation-only
// formats (Q8_1 for Q4_1 and Q5_1, Q8_K for the K- and i-quants).
#define NS_KERNELS_WEIGHT_AND_ACTIVATION_FORMATS(X) X(f32) X(f16) X(bf16) X(q8_0)
#define NS_KERNELS_WEIGHT_FORMATS(X)                                                                            \
  X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(iq4_nl) X(mxfp4) X(q1_0) X(q2_0) X(nvfp4) X(q2_k) X(q3_k) X(q4_k) X(q5_k) \
  X(q6_k) X(tq2_0) X(tq1_0)
#define NS_KERNELS_ACTIVATION_FORMATS(X) X(q8_1) X(q8_k)
#define NS_KERNELS_READ_ONLY_FORMATS(X) \
  X(iq2_xxs) X(iq1_s) X(iq1_m) X(iq4_xs) X(iq3_xxs) X(iq2_xs) X(iq2_s) X(iq3_s)

// The SIMD files: a vec_dot and a tile each (an AVX-512 file where the
// format has one), and the activation converters.
#define NS_KERNELS_SIMD_DOTS(X)                                                                                  \
  X(f32_avx2) X(f16_avx2) X(bf16_avx2) X(q8_0_avx2) X(q8_0_avx512) X(q4_0_avx2) X(q4_0_avx512) X(q4_1_avx2)      \
  X(q5_0_avx2) X(q5_1_avx2) X(iq4_nl_avx2) X(iq4_nl_avx512) X(mxfp4_avx2) X(mxfp4_avx512) X(q1_0_avx2)          \
  X(q2_0_avx2) X(nvfp4_avx2) X(q2_k_avx2) X(q2_k_avx512) X(q3_k_avx2) X(q3_k_avx512) X(q4_k_avx2) X(q4_k_avx512) \
  X(q5_k_avx2) X(q5_k_avx512) X(q6_k_avx2) X(q6_k_avx512) X(iq2_xxs_avx2) X(iq1_s_avx2) X(iq1_m_avx2)           \
  X(iq4_xs_avx2) X(iq3_xxs_avx2) X(iq2_xs_avx2) X(tq2_0_avx2) X(tq1_0_avx2) X(iq2_s_avx2) X(iq3_s_avx2)
#define NS_KERNELS_SIMD_QUANTIZERS(X) X(f16_avx2) X(bf16_avx2) X(q8_0_avx2) X(q8_1_avx2) X(q8_k_avx2)
// clang-format on

#define NS_KERNELS_DECLARE_BLOCK(ns, elems, bytes) \
  namespace ns {                                   \
  inline constexpr int64_t kBlockElems = elems;    \
  inline constexpr size_t kBlockBytes = bytes;     \
  }
#define NS_KERNELS_DECLARE_DEQUANTIZE(ns)                  \
  namespace ns {                                           \
  void dequantize(const void* src, float* dst, int64_t n); \
  }
#define NS_KERNELS_DECLARE_QUANTIZE(ns)                  \
  namespace ns {                                         \
  void quantize(const float* src, void* dst, int64_t n); \
  }
#define NS_KERNELS_DECLARE_VEC_DOT(ns)                    \
  namespace ns {                                          \
  float vec_dot(const void* w, const void* x, int64_t n); \
  }
#define NS_KERNELS_DECLARE_TILE(ns) \
  namespace ns {                    \
  void tile(const Tile& tile);      \
  }
#define NS_KERNELS_DECLARE_REFERENCE(ns) \
  NS_KERNELS_DECLARE_DEQUANTIZE(ns) NS_KERNELS_DECLARE_QUANTIZE(ns) NS_KERNELS_DECLARE_VEC_DOT(ns)
#define NS_KERNELS_DECLARE_ACTIVATION(ns) NS_KERNELS_DECLARE_DEQUANTIZE(ns) NS_KERNELS_DECLARE_QUANTIZE(ns)
#define NS_KERNELS_DECLARE_READ_ONLY(ns) NS_KERNELS_DECLARE_DEQUANTIZE(ns) NS_KERNELS_DECLARE_VEC_DOT(ns)
#define NS_KERNELS_DECLARE_SIMD_DOT(ns) NS_KERNELS_DECLARE_VEC_DOT(ns) NS_KERNELS_DECLARE_TILE(ns)

NS_KERNELS_BLOCK_SIZES(NS_KERNELS_DECLARE_BLOCK)
NS_KERNELS_WEIGHT_AND_ACTIVATION_FORMATS(NS_KERNELS_DECLARE_REFERENCE)
NS_KERNELS_WEIGHT_FORMATS(NS_KERNELS_DECLARE_REFERENCE)
NS_KERNELS_ACTIVATION_FORMATS(NS_KERNELS_DECLARE_ACTIVATION)
NS_KERNELS_READ_ONLY_FORMATS(NS_KERNELS_DECLARE_READ_ONLY)
NS_KERNELS_SIMD_DOTS(NS_KERNELS_DECLARE_SIMD_DOT)
NS_KERNELS_SIMD_QUANTIZERS(NS_KERNELS_DECLARE_QUANTIZE)
#undef NS_KERNELS_DECLARE_SIMD_DOT
#undef NS_KERNELS_DECLARE_READ_ONLY
#undef NS_KERNELS_DECLARE_ACTIVATION
#undef NS_KERNELS_DECLARE_REFERENCE
#undef NS_KERNELS_DECLARE_TILE
#undef NS_KERNELS_DECLARE_VEC_DOT
#undef NS_KERNELS_DECLARE_QUANTIZE
#undef NS_KERNELS_DECLARE_DEQUANTIZE
#undef NS_KERNELS_DECLARE_BLOCK

// What a format's kernels share beyond the table.
namespace iq4_nl {
// ggml's kvalues_iq4nl: the 16 levels a nibble selects.
inline constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
}  // namespace iq4_nl

// MXFP4 (OCP microscaling): 16 E2M1 codes, sign in bit 3, and one power-of-two
// scale per block. ggml stores the E2M1 values doubled, as int8 (kvalues_mxfp4),
// and halves the scale to match.
namespace mxfp4 {
// ggml's kvalues_mxfp4: 2 * E2M1 value of each code (0 and 8 are both zero).
inline constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half the E8M0 scale, 2^(e - 128), exactly (ggml_e8m0_to_fp32_half, which
// dequantize, quantize and vec_dot all use): float subnormals for e < 2, and
// e = 255 (NaN in the OCP format, rejected by ggml's row validation) is 2^127.
static inline float scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// ggml's best_index_mxfp4: the first code whose level times d is nearest to
// x (NVFP4's quantizer uses it too).
int best_index(float x, float d);
}  // namespace mxfp4

// NVFP4: MXFP4's E2M1 codes (mxfp4::kValues, doubled) in 16-element
// sub-blocks, each with an unsigned E4M3 scale (4 exponent bits, bias 7, 3
// mantissa bits), which ggml halves to match the doubled table.
namespace nvfp4 {
inline constexpr int64_t kSubElems = 16;
// Half the UE4M3 value, exactly (ggml_ue4m3_to_fp32): exponent field 0 is
// subnormal (m * 2^-9); bit 7 is ignored except that 0x7f (E4M3's NaN) reads
// as 0, as in ggml.
static constexpr float scale_of(uint8_t e) {
  if (e == 0 || e == 0x7f) return 0.0f;
  const int ex = (e >> 3) & 0xf, m = e & 7;
  if (ex == 0) return static_cast<float>(m) * 0x1p-10f;
  float v = static_cast<float>(8 + m) * 0x1p-11f;  // (1 + m / 8) 2^(ex - 7) / 2 = (8 + m) 2^(ex - 11)
  for (int i = 0; i < ex; ++i) v *= 2;
  return v;
}
// scale_of for every byte (nvfp4.cpp), a load per sub-block in the kernels.
struct ScaleTable {
  float value[256];
};
extern const ScaleTable kScales;
static inline float scale(uint8_t e) { return kScales.value[e]; }
}  // namespace nvfp4

// Q4_0_R16: Q4_0 rows in memory, 16 at a time interleaved (q4_0_r16.h has the
// layout); rows past the last whole group stay in Q4_0's layout. Its kernels
// are tiles only: a lone row is not contiguous, so vec_dot and dequantize
// throw, and matmul splits it by whole groups (FormatKernels::row_group).
namespace q4_0_r16 {
void dequantize(const void* src, float* dst, int64_t n);  // throws
float vec_dot(const void* w, const void* x, int64_t n);   // throws
void tile(const Tile& tile);                              // the scalar reference
}  // namespace q4_0_r16
namespace q4_0_r16_avx2 {
void tile(const Tile& tile);
}  // namespace q4_0_r16_avx2
namespace q4_0_r16_avx512 {
void tile(const Tile& tile);
}  // namespace q4_0_r16_avx512

}  // namespace ns::kernels
