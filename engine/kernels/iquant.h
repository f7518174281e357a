// Byte layouts of the i-quant super-blocks (ggml-common.h: 256 elements,
// little-endian, packed) and the field decoding shared by their scalar and
// AVX2 files. Offsets are bytes from the start of a block. Every format here
// splits a super-block into 8 sub-blocks of 32 elements (v = element / 32),
// each made of groups of 8 (l = element % 32 / 8) or, for the IQ3 grids, of 4.
// The grids and sign tables are in iq_tables.h.
//
//   IQ2_XXS  fp16 d; per sub-block 8 bytes at qs + 8v: bytes 0..3 index group
//            l in kIq2xxsGrid; the uint32 at +4 holds group l's 7 sign bits at
//            7l (kSigns completes them to 8) and the scale s in bits 28..31.
//            x = d * (0.5 + s) * 0.25 * grid * sign; the dot uses ls = 2s + 1
//            and a final 1/8.
//   IQ1_S    fp16 d; qs[4v + l] the low 8 bits of group l's index in kIq1sGrid
//            (entries -1, 0, 1), uint16 qh[v]: bits 3l..3l+2 its high 3 bits,
//            bits 12..14 the scale s, bit 15 the sign of the shift delta.
//            x = d * (2s + 1) * (grid + delta), delta = +-1/8.
//   IQ1_M    no d field: qs[4v + l] as IQ1_S; qh[2v + l / 2], nibble l % 2:
//            low 3 bits the high index bits, bit 3 the sign of delta of group
//            l; 4 uint16 scale words, word v / 2 holding at bit 6 (v % 2) the
//            3-bit scale of groups 0, 1 and at +3 that of groups 2, 3; the top
//            nibbles of words 0..3 are bits 0..3, 4..7, 8..11, 12..15 of the
//            fp16 super-scale d. x = d * (2s + 1) * (grid + delta).
//   IQ4_XS   fp16 d; uint16 scales_h, bits 2v..2v+1 the high bits of sub-block
//            v's 6-bit scale; scales_l[v / 2], nibble v % 2, its low bits;
//            qs[16v..16v+15] nibbles as IQ4_NL. x = d * (ls - 32) * kValues[q].
//   IQ3_XXS  fp16 d; qs[8v + k] indexes group k (4 elements) in kIq3xxsGrid;
//            the uint32 at 66 + 4v holds the 7 sign bits of 8 elements at 7l
//            and the scale s in bits 28..31. x = d * (0.5 + s) * 0.5 * grid *
//            sign; the dot uses 2s + 1 and a final 1/4.
//   IQ2_XS   fp16 d; uint16 qs[4v + l]: low 9 bits the index in kIq2xsGrid,
//            top 7 the sign bits; scales[v]: the low nibble scales groups 0, 1,
//            the high nibble groups 2, 3. x = d * (0.5 + s) * 0.25 * grid * sign.
//   IQ2_S    fp16 d; the index of group l is qs[4v + l] with bits 2l..2l+1 of
//            qh[v] above it (10 bits, kIq2sGrid); signs[4v + l] all 8 sign
//            bits; scales as IQ2_XS.
//   IQ3_S    fp16 d; the index of group k (4 elements) is qs[8v + k] with bit
//            k of qh[v] as bit 8 (kIq3sGrid); signs[4v + l] 8 sign bits;
//            scales[v / 2], nibble v % 2, the scale s. x = d * (2s + 1) * grid * sign.
//   TQ2_0    ternary, no grid: qs[64], then fp16 d. Element 128h + 32l + m is
//            bits 2l..2l+1 of qs[32h + m], q in 0..2; x = d * (q - 1).
//   TQ1_0    ternary, 5 base-3 digits per byte: qs[48], qh[4], then fp16 d.
//            Digit n of byte b is (uint8(b * 3^n) * 3) >> 8 (ggml stores a
//            byte as ceil(value * 256 / 243) so that the top digit comes out
//            first); element 32n + m (< 160) is digit n of qs[m], 160 + 16n + m
//            (< 240) digit n of qs[32 + m], 240 + 4n + j digit n of qh[j].
//            x = d * (digit - 1).
//
// The scalar skeletons below (signed_grid_*, iq1_*, ternary_*) hold the loops
// the scalar files share; each format's file keeps its own block decoding.
//
// Included by the scalar i-quant files and *_avx2.cpp: everything here has
// internal linkage or is a template (see format.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/format.h"
#include "engine/kernels/half.h"
#include "engine/kernels/iq_tables.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::iq {

inline constexpr int64_t kElems = 256;  // ggml's QK_K

struct Iq2xxs {
  static constexpr size_t d = 0, qs = 2, bytes = 66;
};
struct Iq1s {
  static constexpr size_t d = 0, qs = 2, qh = 34, bytes = 50;
};
struct Iq1m {
  static constexpr size_t qs = 0, qh = 32, scales = 48, bytes = 56;
};
struct Iq4xs {
  static constexpr size_t d = 0, scales_h = 2, scales_l = 4, qs = 8, bytes = 136;
};
struct Iq3xxs {
  static constexpr size_t d = 0, qs = 2, sas = 66, bytes = 98;
};
struct Iq2xs {
  static constexpr size_t d = 0, qs = 2, scales = 66, bytes = 74;
};
struct Iq2s {
  static constexpr size_t d = 0, qs = 2, signs = 34, qh = 66, scales = 74, bytes = 82;
};
struct Iq3s {
  static constexpr size_t d = 0, qs = 2, qh = 66, signs = 74, scales = 106, bytes = 110;
};
struct Tq2 {
  static constexpr size_t qs = 0, d = 64, bytes = 66;
};
struct Tq1 {
  static constexpr size_t qs = 0, qh = 48, d = 52, bytes = 54;
};

// TQ1_0: base-3 digit n (n < 5) of a packed byte, in 0..2.
static inline int tq1_digit(uint8_t b, int n) {
  constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto t = static_cast<uint8_t>(b * kPow3[n]);
  return (t * 3) >> 8;
}

// IQ1_S / IQ1_M: grid entries are -1, 0, 1, and delta is +-1/8 (ggml's
// IQ1S_DELTA, IQ1M_DELTA).
inline constexpr float kIq1Delta = 0.125f;

static inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte j of a grid entry (element j of its group).
static inline uint8_t grid_byte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// kSignFactors[s]: byte j is -1 (0xff) where bit j of s is set, else +1: the
// signs of 8 elements as multipliers, one 64-bit load per group.
struct SignFactors {
  uint64_t v[256];
};
static constexpr SignFactors make_sign_factors() {
  SignFactors t{};
  for (int s = 0; s < 256; ++s)
    for (int j = 0; j < 8; ++j) t.v[s] |= static_cast<uint64_t>((s >> j) & 1 ? 0xff : 0x01) << (8 * j);
  return t;
}
inline constexpr SignFactors kSignFactors = make_sign_factors();

// IQ2_XXS sub-block v: the group indices (bytes 0..3) and the sign/scale word.
static inline uint32_t iq2xxs_signs_scale(const uint8_t* blk, int v) { return load_u32(blk + Iq2xxs::qs + 8 * v + 4); }
static inline uint8_t iq2xxs_index(const uint8_t* blk, int v, int l) { return blk[Iq2xxs::qs + 8 * v + l]; }
// The 8 sign bits of group l from a sign/scale word (IQ2_XXS, IQ3_XXS).
static inline uint8_t signs7(uint32_t word, int l) { return kSigns[(word >> (7 * l)) & 127]; }

// IQ1_S sub-block v: the index of group l, the scale 2s + 1 and delta's sign.
static inline uint16_t iq1s_qh(const uint8_t* blk, int v) { return load_u16(blk + Iq1s::qh + 2 * v); }
static inline int iq1s_index(const uint8_t* blk, int v, int l) {
  return blk[Iq1s::qs + 4 * v + l] | (((iq1s_qh(blk, v) >> (3 * l)) & 7) << 8);
}
static inline int iq1s_scale(uint16_t qh) { return 2 * ((qh >> 12) & 7) + 1; }
static inline bool iq1s_negative_delta(uint16_t qh) { return (qh & 0x8000) != 0; }

// IQ1_M: the fp16 bits of d, and for sub-block v the index of group l, the
// sign of its delta and the scale 2s + 1 of its half (groups 0, 1 or 2, 3).
static inline uint16_t iq1m_d_bits(const uint8_t* blk) {
  const uint8_t* sc = blk + Iq1m::scales;
  return static_cast<uint16_t>((load_u16(sc) >> 12) | ((load_u16(sc + 2) >> 8) & 0x00f0) |
                               ((load_u16(sc + 4) >> 4) & 0x0f00) | (load_u16(sc + 6) & 0xf000));
}
static inline int iq1m_index(const uint8_t* blk, int v, int l) {
  const int h = blk[Iq1m::qh + 2 * v + l / 2] >> (4 * (l % 2));
  return blk[Iq1m::qs + 4 * v + l] | ((h & 7) << 8);
}
static inline bool iq1m_negative_delta(const uint8_t* blk, int v, int l) {
  return ((blk[Iq1m::qh + 2 * v + l / 2] >> (4 * (l % 2))) & 8) != 0;
}
static inline int iq1m_scale(const uint8_t* blk, int v, int half) {
  return 2 * ((load_u16(blk + Iq1m::scales + 2 * (v / 2)) >> (6 * (v % 2) + 3 * half)) & 7) + 1;
}

// Writes d (fp16 bits) as the super-scale of a block of t, an i-quant or
// ternary type: the i-quants keep it in their first two bytes but IQ1_M (see
// iq1m_d_bits), the ternary types in their last two. For tests and
// benchmarks, which build blocks from random bytes.
static inline void set_super_scale(gguf::GgmlType t, uint8_t* blk, uint16_t d) {
  if (t == gguf::GgmlType::TQ1_0 || t == gguf::GgmlType::TQ2_0) {
    store_u16(blk + (t == gguf::GgmlType::TQ1_0 ? Tq1::d : Tq2::d), d);
    return;
  }
  if (t != gguf::GgmlType::IQ1_M) {
    store_u16(blk, d);
    return;
  }
  for (int k = 0; k < 4; ++k) {
    uint8_t* word = blk + Iq1m::scales + 2 * k;
    store_u16(word, static_cast<uint16_t>((load_u16(word) & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12)));
  }
}

// IQ3_XXS sub-block v: the index of group k (4 elements) and the sign/scale word.
static inline uint8_t iq3xxs_index(const uint8_t* blk, int v, int k) { return blk[Iq3xxs::qs + 8 * v + k]; }
static inline uint32_t iq3xxs_signs_scale(const uint8_t* blk, int v) { return load_u32(blk + Iq3xxs::sas + 4 * v); }

// IQ2_XS sub-block v, group l: the 16-bit field (index and sign bits).
static inline uint16_t iq2xs_field(const uint8_t* blk, int v, int l) {
  return load_u16(blk + Iq2xs::qs + 8 * v + 2 * l);
}

// IQ2_S sub-block v, group l: the 10-bit index and the 8 sign bits.
static inline int iq2s_index(const uint8_t* blk, int v, int l) {
  return blk[Iq2s::qs + 4 * v + l] | ((blk[Iq2s::qh + v] << (8 - 2 * l)) & 0x300);
}
static inline uint8_t iq2s_signs(const uint8_t* blk, int v, int l) { return blk[Iq2s::signs + 4 * v + l]; }

// IQ2_XS / IQ2_S sub-block v: the 4-bit scale s of groups 0, 1 (half 0) or 2, 3.
static inline int iq2_half_scale(const uint8_t* scales, int v, int half) { return (scales[v] >> (4 * half)) & 0x0f; }

// IQ3_S sub-block v: the 9-bit index of group k (4 elements), the 8 sign bits
// of group l (8 elements), and the scale 2s + 1.
static inline int iq3s_index(const uint8_t* blk, int v, int k) {
  return blk[Iq3s::qs + 8 * v + k] | ((blk[Iq3s::qh + v] << (8 - k)) & 256);
}
static inline uint8_t iq3s_signs(const uint8_t* blk, int v, int l) { return blk[Iq3s::signs + 4 * v + l]; }
static inline int iq3s_scale(const uint8_t* blk, int v) {
  return 2 * ((blk[Iq3s::scales + v / 2] >> (4 * (v % 2))) & 0x0f) + 1;
}

// IQ4_XS sub-block v: its 6-bit scale minus 32.
static inline int iq4xs_scale(const uint8_t* blk, int v) {
  const int lo = (blk[Iq4xs::scales_l + v / 2] >> (4 * (v % 2))) & 0x0f;
  const int hi = (load_u16(blk + Iq4xs::scales_h) >> (2 * v)) & 3;
  return (lo | (hi << 4)) - 32;
}

// Scalar reference of the signed-grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S): every group of 8 elements is 8 grid magnitudes times 8
// signs, and every half sub-block (16 elements) has one scale. A format
// supplies a decoder G:
//   G::L                  its layout (iquant.h); fp16 d at L::d
//   G::kFactor            the constant the dot's float sum is multiplied by at
//                         the end (ggml's 1/8, 1/4 or 1)
//   G::dl(d, blk, v, h)   the float scale of half h of sub-block v, in the
//                         format's own float expression (ggml's order)
//   G::ls(blk, v, h)      its integer scale in the dot
//   G::magnitudes(blk, v, l)  group l's 8 magnitudes, byte j element j
//   G::signs(blk, v, l)   group l's 8 sign bits, bit j element j
// dequantize: x = dl * magnitude * (+-1). vec_dot: per super-block the exact
// sum of ls * (+-magnitude) * x over the halves, then d_w d_x * sum into the
// float total, times kFactor at the end. The integer sum is exact, so summing
// per half or per sub-block gives the same int32.
template <class G>
static void signed_grid_dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kElems; ++b, blk += G::L::bytes) {
    const float d = load_fp16(blk + G::L::d);
    for (int v = 0; v < 8; ++v) {
      for (int l = 0; l < 4; ++l) {
        const float db = G::dl(d, blk, v, l / 2);
        const uint64_t grid = G::magnitudes(blk, v, l);
        const uint8_t signs = G::signs(blk, v, l);
        for (int j = 0; j < 8; ++j)
          *dst++ = db * static_cast<float>(grid_byte(grid, j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

template <class G>
static float signed_grid_vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kElems; ++b, wb += G::L::bytes, xb += kq::Q8K::bytes) {
    const float d = load_fp16(wb + G::L::d) * kq::load_f32(xb + kq::Q8K::d);
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t bsum = 0;
    for (int v = 0; v < 8; ++v) {
      for (int half = 0; half < 2; ++half) {
        int32_t s = 0;
        for (int l = 2 * half; l < 2 * half + 2; ++l, q8 += 8) {
          const uint64_t grid = G::magnitudes(wb, v, l);
          const uint8_t signs = G::signs(wb, v, l);
          for (int j = 0; j < 8; ++j) {
            const int p = grid_byte(grid, j) * q8[j];
            s += (signs >> j) & 1 ? -p : p;
          }
        }
        bsum += s * G::ls(wb, v, half);
      }
    }
    sum += d * static_cast<float>(bsum);
  }
  return G::kFactor * sum;
}

// IQ2_XS, IQ2_S (layout L): a 4-bit scale s per half sub-block in
// L::scales; x = d * (0.5 + s) * 0.25 * grid * sign, the dot uses 2s + 1 and
// 1/8. A signed_grid decoder's scale part: the format adds its grid and signs.
template <class Layout>
struct Iq2HalfScales {
  using L = Layout;
  static constexpr float kFactor = 0.125f;
  static float dl(float d, const uint8_t* blk, int v, int half) {
    return d * (0.5f + static_cast<float>(iq2_half_scale(blk + L::scales, v, half))) * 0.25f;
  }
  static int32_t ls(const uint8_t* blk, int v, int half) { return 2 * iq2_half_scale(blk + L::scales, v, half) + 1; }
};

// IQ2_XXS, IQ3_XXS (layout L): sub-block v's sign/scale word (SignsScale)
// holds the 7-bit signs of its groups and one scale s in bits 28..31 for both
// halves; x = d * (0.5 + s) * kDl * grid * sign, the dot uses 2s + 1 and
// kDotFactor. A signed_grid decoder's scale and sign part: the format adds
// its grid.
template <class Layout, uint32_t (*SignsScale)(const uint8_t*, int), float kDl, float kDotFactor>
struct XxsScales {
  using L = Layout;
  static constexpr float kFactor = kDotFactor;
  static float dl(float d, const uint8_t* blk, int v, int) {
    return d * (0.5f + static_cast<float>(SignsScale(blk, v) >> 28)) * kDl;
  }
  static int32_t ls(const uint8_t* blk, int v, int) { return static_cast<int32_t>(2 * (SignsScale(blk, v) >> 28) + 1); }
  static uint8_t signs(const uint8_t* blk, int v, int l) { return signs7(SignsScale(blk, v), l); }
};

// The 8 magnitudes of group l of an IQ3 sub-block: grid entries (4 bytes) of
// its groups of 4, 2l and 2l + 1, as one word.
static inline uint64_t grid_pair(uint32_t lo, uint32_t hi) { return lo | (static_cast<uint64_t>(hi) << 32); }

// Scalar reference of IQ1_S and IQ1_M: group l of sub-block v is 8 grid
// values -1, 0, 1 (kIq1sGrid) plus a shift delta = +-1/8, and every half
// sub-block (16 elements) has one scale 2s + 1. A format supplies G:
//   G::L                     its layout
//   G::d(blk)                the super-scale as a float
//   G::index(blk, v, l)      group l's 11-bit grid index
//   G::negative_delta(blk, v, l)  whether group l's delta is -1/8
//   G::scale(blk, v, h)      the scale 2s + 1 of half h
//   G::delta_xsum(blk, xb, q8, v, h)  the sum over half h of +-x (delta's
//                            sign), q8 its 16 activations, xb the Q8_K block
//                            (IQ1_S takes it from bsums as ggml does)
// dequantize: x = d * scale * (grid + delta). vec_dot: per super-block the
// exact sums of scale * grid * x and of scale * delta_xsum, then
// d_w d_x (sum + sum_delta / 8).
template <class G>
static void iq1_dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kElems; ++b, blk += G::L::bytes) {
    const float d = G::d(blk);
    for (int v = 0; v < 8; ++v) {
      for (int l = 0; l < 4; ++l) {
        const float dl = d * static_cast<float>(G::scale(blk, v, l / 2));
        const float delta = G::negative_delta(blk, v, l) ? -kIq1Delta : kIq1Delta;
        const uint64_t grid = kIq1sGrid[G::index(blk, v, l)];
        for (int j = 0; j < 8; ++j) *dst++ = dl * (static_cast<float>(static_cast<int8_t>(grid_byte(grid, j))) + delta);
      }
    }
  }
}

template <class G>
static float iq1_vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kElems; ++b, wb += G::L::bytes, xb += kq::Q8K::bytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int32_t sumi = 0, sumi_delta = 0;
    for (int v = 0; v < 8; ++v) {
      for (int half = 0; half < 2; ++half) {
        const int ls = G::scale(wb, v, half);
        const int32_t sd = G::delta_xsum(wb, xb, q8, v, half);
        int32_t s = 0;
        for (int l = 2 * half; l < 2 * half + 2; ++l, q8 += 8) {
          const uint64_t grid = kIq1sGrid[G::index(wb, v, l)];
          for (int j = 0; j < 8; ++j) s += static_cast<int8_t>(grid_byte(grid, j)) * q8[j];
        }
        sumi += ls * s;
        sumi_delta += ls * sd;
      }
    }
    sum += G::d(wb) * kq::load_f32(xb + kq::Q8K::d) *
           (static_cast<float>(sumi) + kIq1Delta * static_cast<float>(sumi_delta));
  }
  return sum;
}

// Scalar reference of the ternary types (TQ1_0, TQ2_0): a block unpacks to
// 256 weights -1, 0, 1 (U::unpack, element order) times d (fp16 at U::L::d).
// vec_dot: per super-block the exact sum of w * x, times d_w d_x.
template <class U>
static void ternary_dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kElems; ++b, blk += U::L::bytes, dst += kElems) {
    const float d = load_fp16(blk + U::L::d);
    int8_t w[kElems];
    U::unpack(blk, w);
    for (int e = 0; e < kElems; ++e) dst[e] = static_cast<float>(w[e]) * d;
  }
}

// ggml's quantize_row_tq1_0_ref / quantize_row_tq2_0_ref (llama-quantize
// ignores an importance matrix for both): per super-block d is the largest
// magnitude (stored as fp16, the digits use the unrounded float d) and each
// weight's digit is round(x / d) + 1 (x * (1 / d) in float, half away from
// zero) in 0..2; an all-zero block gets d = 0 and digit 1 everywhere.
// U::pack(digits in element order, block) writes the format's bytes but d.
template <class U>
static void ternary_quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kElems; ++b, blk += U::L::bytes, src += kElems) {
    float amax = 0;
    for (int e = 0; e < kElems; ++e) {
      const float a = std::fabs(src[e]);
      amax = amax > a ? amax : a;  // ggml's MAX, NaN included
    }
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    uint8_t digits[kElems];
    for (int e = 0; e < kElems; ++e) digits[e] = static_cast<uint8_t>(std::lround(src[e] * id) + 1);
    U::pack(digits, blk);
    store_u16(blk + U::L::d, float_to_half(amax));
  }
}

template <class U>
static float ternary_vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kElems; ++b, wb += U::L::bytes, xb += kq::Q8K::bytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int8_t wv[kElems];
    U::unpack(wb, wv);
    int32_t s = 0;
    for (int e = 0; e < kElems; ++e) s += wv[e] * q8[e];
    sum += static_cast<float>(s) * (load_fp16(wb + U::L::d) * kq::load_f32(xb + kq::Q8K::d));
  }
  return sum;
}

}  // namespace ns::kernels::iq
