// Internal contract between the dispatcher (dispatch.cpp, matmul.cpp) and the
// per-format kernel files. Each format contributes one FormatKernels row to
// the table in dispatch.cpp; a format without an AVX2 version leaves those
// pointers null and runs its scalar reference instead, and one without an
// AVX-512 version runs its AVX2 kernels under Isa::avx512 (kernels_for()).
//
// This header is included by *_avx2.cpp and *_avx512.cpp too, so everything defined here has
// internal linkage or is a plain declaration: an inline function with external
// linkage compiled once with -mavx2 could be the copy the linker keeps for
// scalar callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/kernels.h"

namespace ns::kernels {

using RowToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using RowFromFloatFn = void (*)(const float* src, void* dst, int64_t n);

// A rectangle of the product: y[t * y_stride + r] = dot(w row r, x row t) for
// r < n_rows, t < n_tokens. w rows are in the weight format, x rows in its
// vec-dot format; both are `n` elements long.
struct Tile {
  const uint8_t* w;
  size_t w_stride;
  int64_t n_rows;
  const uint8_t* x;
  size_t x_stride;
  int64_t n_tokens;
  int64_t n;
  float* y;
  int64_t y_stride;
};
using TileFn = void (*)(const Tile& tile);

struct FormatKernels {
  GgmlType type;
  GgmlType vec_dot_type;
  RowToFloatFn dequantize;            // reference
  RowFromFloatFn quantize;            // reference; also the scalar activation converter; null: a
                                      // read-only weight format (quantize_row refuses it)
  VecDotFn vec_dot;                   // reference; null for activation-only formats
  RowFromFloatFn quantize_avx2;       // activation converter under AVX2; null: the reference
  VecDotFn vec_dot_avx2;              // null: no AVX2 version yet
  TileFn tile_avx2;                   // null: matmul loops over vec_dot_avx2
  VecDotFn vec_dot_avx512 = nullptr;  // AVX-512 + VNNI; null: the AVX2 kernels
  TileFn tile_avx512 = nullptr;       // null (with vec_dot_avx512 null): tile_avx2
  TileFn tile_scalar = nullptr;       // the reference as a tile; null: matmul loops over vec_dot
  int64_t row_group = 1;              // a tile starts at a multiple of this many rows (interleaved layouts)
};

// The kernels a format runs under an ISA the CPU has (the fallbacks above
// resolved): the activation converter, the one-token dot and the tile (null:
// loop over vec_dot).
struct IsaKernels {
  RowFromFloatFn quantize;
  VecDotFn vec_dot;
  TileFn tile;
};
IsaKernels kernels_for(const FormatKernels& f, Isa isa);

// The row for t, or nullptr when this build has no kernels for it.
const FormatKernels* find_format(GgmlType t);
// The row for a weight type that has kernels; throws ns::Error (bad_model) naming
// `what` and the supported types otherwise.
const FormatKernels& require_format(GgmlType t, const char* what);
// Throws ns::Error (bad_model) unless n is a whole number of t's blocks.
void require_whole_blocks(GgmlType t, int64_t n, const char* what);

// Block fields are read with memcpy: GGUF rows carry no alignment promise
// beyond the tensor's start, and the bytes are not objects of these types.
static inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

// fp16_table[h] == fp16_to_fp32(h) for every h (256 KiB, built at compile time).
// For block scales a table load is cheaper than F16C's convert-and-shuffle,
// and it serves the scalar code as well.
struct Fp16Table {
  float value[65536];
};
extern const Fp16Table fp16_table;

static inline float load_fp16(const uint8_t* p) { return fp16_table.value[load_u16(p)]; }

// The scalar reference of the float-like formats (F32, F16, BF16): rows of
// kBytes-byte elements that Load widens to float, Round narrows a float to
// (2-byte formats). The dot is ggml's scalar one: float products, double sum.
template <size_t kBytes, float (*Load)(const uint8_t*)>
static float float_row_dot(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const uint8_t*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Load(a + kBytes * i) * Load(b + kBytes * i));
  return static_cast<float>(sum);
}
template <float (*Load)(const uint8_t*)>
static void widen_row(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Load(h + 2 * i);
}
template <uint16_t (*Round)(float)>
static void narrow_row(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_u16(h + 2 * i, Round(src[i]));
}

}  // namespace ns::kernels
