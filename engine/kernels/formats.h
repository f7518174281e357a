// The kernel files of each format, one namespace per file. Adding a format
// means one <format>.cpp (scalar reference), optionally one <format>_avx2.cpp,
// their declarations here and one row in dispatch.cpp's table. A format that
// only ever holds activations (Q8_K, for the K-quants) is a row whose vec_dot
// is null: matmul finds its quantizers, is_supported() says no.
//
// Block layouts are ggml's (ggml-common.h), little-endian, packed:
//   Q8_0: fp16 d, int8 q[32];                        x[j] = d * q[j]
//   Q4_0: fp16 d, uint8 qs[16]; element j < 16 in the low nibble of qs[j],
//         element j + 16 in its high nibble;          x[j] = d * (nibble - 8)
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace ns::kernels
