// Byte layouts of the K-quant super-blocks (ggml-common.h: 256 elements,
// little-endian, packed) and the decoding of their packed sub-block scales,
// shared by the scalar and AVX2 files of Q2_K..Q6_K and of Q8_K, their
// activation format. Offsets are bytes from the start of a block.
//
// Element order inside a super-block, as ggml stores it:
//   Q2_K  qs[64]: element 128 h + 32 k + l (h < 2, k < 4, l < 32) is bits 2k..2k+1
//         of qs[32 h + l]; sub-block (16 elements) e / 16 has scales[e / 16]:
//         low nibble the scale, high nibble the min. x = d sc q - dmin m.
//   Q3_K  low 2 bits as Q2_K; the third bit of element e is bit e / 32 of
//         hmask[e % 32], set meaning +0 and clear meaning -4; 16 signed 6-bit
//         scales (see unpack_q3k_scales). x = d (sc - 32) q, q in [-4, 3].
//   Q4_K  qs[128]: element 64 c + l is the low nibble of qs[32 c + l] for
//         l < 32, the high nibble of qs[32 c + l - 32] otherwise; 8 sub-blocks
//         of 32 with 6-bit scales and mins (unpack_k4_scales). x = d sc q - dmin m.
//   Q5_K  as Q4_K, plus the fifth bit of element 64 c + l in qh[l % 32], bit
//         2 c (l < 32) or 2 c + 1.
//   Q6_K  element 128 h + 32 k + l: low 4 bits from ql[64 h + l + 32 (k % 2)],
//         low nibble for k < 2, high nibble otherwise; high 2 bits are bits
//         2k..2k+1 of qh[32 h + l]; int8 scale per 16 elements. x = d sc (q - 32).
//   Q8_K  float d, int8 qs[256], int16 bsums[16] (the sums of each 16 qs).
//
// Included by *_avx2.cpp: everything here has internal linkage (see format.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/format.h"

namespace ns::kernels::kq {

inline constexpr int64_t kElems = 256;  // ggml's QK_K

struct Q8K {
  static constexpr size_t d = 0, qs = 4, bsums = 260, bytes = 292;
};
struct Q2K {
  static constexpr size_t scales = 0, qs = 16, d = 80, dmin = 82, bytes = 84;
};
struct Q3K {
  static constexpr size_t hmask = 0, qs = 32, scales = 96, d = 108, bytes = 110;
};
struct Q4K {
  static constexpr size_t d = 0, dmin = 2, scales = 4, qs = 16, bytes = 144;
};
struct Q5K {
  static constexpr size_t d = 0, dmin = 2, scales = 4, qh = 16, qs = 48, bytes = 176;
};
struct Q6K {
  static constexpr size_t ql = 0, qh = 128, scales = 192, d = 208, bytes = 210;
};

static inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline int16_t load_i16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Q4_K / Q5_K: 8 scales and 8 mins of 6 bits in 12 bytes (ggml's
// get_scale_min_k4). Sub-blocks 0..3 keep both in the low 6 bits of bytes
// 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 keep their low 4 bits in the
// nibbles of bytes 8..11 and their top 2 bits in the spare top bits of 0..7.
static inline void unpack_k4_scales(const uint8_t* p, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = p[j] & 63;
    mn[j] = p[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((p[j + 4] & 0x0f) | ((p[j - 4] >> 6) << 4));
    mn[j] = static_cast<uint8_t>((p[j + 4] >> 4) | ((p[j] >> 6) << 4));
  }
}

// Q3_K: 16 scales of 6 bits stored with a +32 offset; returned in [-32, 31].
// Low 4 bits: scale j < 8 in the low nibble of byte j, j >= 8 in the high
// nibble of byte j - 8. Top 2 bits: bits 2 (j / 4) of byte 8 + j % 4.
static inline void unpack_q3k_scales(const uint8_t* p, int8_t sc[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (p[j] & 0x0f) : (p[j - 8] >> 4);
    const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
    sc[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// The reference Q8_K dot of the formats of 16 sub-blocks of 16 (Q2_K, Q3_K,
// Q6_K). Level(blk, h, k, l): the level of element 128 h + 32 k + l of the
// block at blk.
using K16LevelFn = int (*)(const uint8_t* blk, int h, int k, int l);

// The exact sum over the sub-blocks j of sc[j] times the dot of their levels
// with the Q8_K values q8.
template <K16LevelFn Level, class Scale>
static int32_t k16_isum(const uint8_t* blk, const int8_t* q8, const Scale* sc) {
  int32_t isum = 0;
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int half = 0; half < 2; ++half) {
        int32_t s = 0;
        for (int l = 16 * half; l < 16 * half + 16; ++l) s += Level(blk, h, k, l) * q8[128 * h + 32 * k + l];
        isum += sc[8 * h + 2 * k + half] * s;
      }
    }
  }
  return isum;
}

// Formats without mins (Q3_K, Q6_K): per super-block d_w d_x * k16_isum, the
// int8 scales of a block as Scales(blk, sc) gives them.
template <class L, K16LevelFn Level, void (*Scales)(const uint8_t* blk, int8_t sc[16])>
static float k16_vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kElems; ++b, wb += L::bytes, xb += Q8K::bytes) {
    int8_t sc[16];
    Scales(wb, sc);
    const int32_t isum = k16_isum<Level>(wb, reinterpret_cast<const int8_t*>(xb + Q8K::qs), sc);
    sum += load_fp16(wb + L::d) * load_f32(xb + Q8K::d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace ns::kernels::kq
