// The kernel files of each format, one namespace per file (the K-quants'
// SIMD namespaces are defined together in kquant_avx2.cpp and
// kquant_avx512.cpp, a decoder each in kquant_avx2.h). Adding a format
// means one <format>.cpp (scalar reference), optionally one <format>_avx2.cpp
// and one <format>_avx512.cpp, their declarations here and one row in dispatch.cpp's table. A format that
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

namespace f32 {
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
}  // namespace f32
namespace f32_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace f32_avx2

namespace f16 {
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
}  // namespace f16
namespace f16_avx2 {
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace f16_avx2

namespace bf16 {
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
}  // namespace bf16
namespace bf16_avx2 {
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace bf16_avx2

namespace q8_0 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 32;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace q8_0
namespace q8_0_avx2 {
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q8_0_avx2
namespace q8_0_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q8_0_avx512

namespace q4_0 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace q4_0
namespace q4_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q4_0_avx2
namespace q4_0_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q4_0_avx512

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

// The activation format of Q4_1 and Q5_1 weights (vec_dot null).
namespace q8_1 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 2 + 32;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
}  // namespace q8_1
namespace q8_1_avx2 {
void quantize(const float* src, void* dst, int64_t n);
}  // namespace q8_1_avx2

namespace q4_1 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 2 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_1
}  // namespace q4_1
namespace q4_1_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q4_1_avx2

namespace q5_0 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 4 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace q5_0
namespace q5_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q5_0_avx2

namespace q5_1 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 2 + 4 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_1
}  // namespace q5_1
namespace q5_1_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q5_1_avx2

namespace iq4_nl {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 2 + 16;
// ggml's kvalues_iq4nl: the 16 levels a nibble selects.
inline constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace iq4_nl
namespace iq4_nl_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq4_nl_avx2
namespace iq4_nl_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq4_nl_avx512

// MXFP4 (OCP microscaling): 16 E2M1 codes, sign in bit 3, and one power-of-two
// scale per block. ggml stores the E2M1 values doubled, as int8 (kvalues_mxfp4),
// and halves the scale to match.
namespace mxfp4 {
inline constexpr int64_t kBlockElems = 32;
inline constexpr size_t kBlockBytes = 1 + 16;
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
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace mxfp4
namespace mxfp4_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace mxfp4_avx2
namespace mxfp4_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace mxfp4_avx512

// Q1_0 and Q2_0 (ggml 2026): one fp16 scale per 128 sign bits / 64 2-bit
// codes, dotted against Q8_0 (four / two activation blocks per weight block).
namespace q1_0 {
inline constexpr int64_t kBlockElems = 128;
inline constexpr size_t kBlockBytes = 2 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace q1_0
namespace q1_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q1_0_avx2

namespace q2_0 {
inline constexpr int64_t kBlockElems = 64;
inline constexpr size_t kBlockBytes = 2 + 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace q2_0
namespace q2_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q2_0_avx2

// NVFP4: MXFP4's E2M1 codes (mxfp4::kValues, doubled) in 16-element
// sub-blocks, each with an unsigned E4M3 scale (4 exponent bits, bias 7, 3
// mantissa bits), which ggml halves to match the doubled table.
namespace nvfp4 {
inline constexpr int64_t kBlockElems = 64;
inline constexpr int64_t kSubElems = 16;
inline constexpr size_t kBlockBytes = 4 + 32;
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
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_0
}  // namespace nvfp4
namespace nvfp4_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace nvfp4_avx2

// The activation format of the K-quants (vec_dot null).
namespace q8_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 4 + 256 + 2 * 16;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
}  // namespace q8_k
namespace q8_k_avx2 {
void quantize(const float* src, void* dst, int64_t n);
}  // namespace q8_k_avx2

// The K-quants, dotted against Q8_K. Block layouts: kquant.h.
namespace q2_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 16 + 64 + 2 + 2;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace q2_k
namespace q2_k_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q2_k_avx2
namespace q2_k_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q2_k_avx512

namespace q3_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 32 + 64 + 12 + 2;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace q3_k
namespace q3_k_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q3_k_avx2
namespace q3_k_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q3_k_avx512

namespace q4_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 2 + 12 + 128;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace q4_k
namespace q4_k_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q4_k_avx2
namespace q4_k_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q4_k_avx512

namespace q5_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 2 + 12 + 32 + 128;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace q5_k
namespace q5_k_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q5_k_avx2
namespace q5_k_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q5_k_avx512

namespace q6_k {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 128 + 64 + 16 + 2;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace q6_k
namespace q6_k_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q6_k_avx2
namespace q6_k_avx512 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace q6_k_avx512

// The i-quants, dotted against Q8_K. Read-only: no quantizer (their table row's
// quantize is null; ggml's needs importance matrices and grid searches).
// Block layouts: iquant.h.
namespace iq2_xxs {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 64;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq2_xxs
namespace iq2_xxs_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq2_xxs_avx2

namespace iq1_s {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 32 + 16;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq1_s
namespace iq1_s_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq1_s_avx2

namespace iq1_m {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 32 + 16 + 8;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq1_m
namespace iq1_m_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq1_m_avx2

namespace iq4_xs {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 2 + 4 + 128;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq4_xs
namespace iq4_xs_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq4_xs_avx2

namespace iq3_xxs {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 64 + 32;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq3_xxs
namespace iq3_xxs_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq3_xxs_avx2

namespace iq2_xs {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 64 + 8;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq2_xs
namespace iq2_xs_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq2_xs_avx2

namespace tq2_0 {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 64 + 2;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace tq2_0
namespace tq2_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace tq2_0_avx2

namespace tq1_0 {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 48 + 4 + 2;
void dequantize(const void* src, float* dst, int64_t n);
void quantize(const float* src, void* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace tq1_0
namespace tq1_0_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace tq1_0_avx2

namespace iq2_s {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 32 + 32 + 8 + 8;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq2_s
namespace iq2_s_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq2_s_avx2

namespace iq3_s {
inline constexpr int64_t kBlockElems = 256;
inline constexpr size_t kBlockBytes = 2 + 64 + 8 + 32 + 4;
void dequantize(const void* src, float* dst, int64_t n);
float vec_dot(const void* w, const void* x, int64_t n);  // x: Q8_K
}  // namespace iq3_s
namespace iq3_s_avx2 {
float vec_dot(const void* w, const void* x, int64_t n);
void tile(const Tile& tile);
}  // namespace iq3_s_avx2

}  // namespace ns::kernels
