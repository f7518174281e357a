// Q4_0_R16: Q4_0 weights with their rows interleaved 16 at a time, the layout
// matmul's Q4_0 tiles run on (llama.cpp interleaves 8 rows, block_q4_0x8, for
// the same reason: one weight stream, each block decoded once for the group,
// each integer and float step done for 16 rows at once).
//
// Rows 16 g .. 16 g + 15 (a group, 16 rows x row_bytes, where the plain rows
// were) hold, for each block b in order, 288 bytes:
//   bytes 0-31     the 16 rows' fp16 scales d, row r at 2 r
//   bytes 32-287   their nibbles in 4 slices c = 0..3 of 64 bytes: byte
//                  32 + 64 c + 4 r + k is byte 4 c + k of row r's qs[16]
// so a 64-byte slice is 16 int32 lanes, lane r = 4 bytes of row r: low
// nibbles elements 4 c .. 4 c + 3, high nibbles 16 + 4 c ... (Q4_0's order),
// each lane dotted against one broadcast int32 of the activation block. Rows
// after the last whole group keep Q4_0's layout (a matrix of 1408 rows has
// none; one of 1000 has 8). The bytes per row are Q4_0's, so a repacked
// matrix fits exactly where the file's was.
//
// Arithmetic: each path gives the file-layout Q4_0 kernel's bits of the same
// path (scalar: q4_0::vec_dot; AVX2 and AVX-512: 8 lanes per row, summed as
// block32_avx2.h does, q4_0_r16_simd.h), so repacking an expert changes no
// output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/formats.h"

namespace ns::kernels::q4_0_r16 {

inline constexpr int kRows = 16;
inline constexpr size_t kScaleBytes = 2 * kRows;
inline constexpr size_t kGroupBlockBytes = kRows * q4_0::kBlockBytes;  // 288
static_assert(kGroupBlockBytes == kScaleBytes + 4 * 64, "16 scales and 4 slices of 64 bytes");

// Where byte i (0..15) of row r's qs sits in a group block.
static inline size_t qs_offset(int r, int i) { return kScaleBytes + 64 * (i / 4) + 4 * r + i % 4; }

}  // namespace ns::kernels::q4_0_r16
