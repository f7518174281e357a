// The scalar reference loops of the formats whose 32-element weight blocks
// are dotted against one activation block each (Q8_0, Q4_0, Q5_0, Q4_1,
// Q5_1, IQ4_NL, MXFP4; block32_avx2.h is their AVX2 loop), and the block
// searches and packing their quantizers share. A format is a block
// description B (the ones below):
//   kBlockElems, kBlockBytes   its block
//   kMin                       the block holds an fp16 min m at byte 2 and
//                              is dotted against Q8_1 (else Q8_0)
//   scale(block)               d as a float
//   level(block, j)            element j's integer level: x[j] = d * level
//                              (+ m where kMin)
//   kLevels, pack(code, block) formats with a quantizer here: the number of
//                              codes, and where they are stored
// The dot product is ggml's generic one: per block the exact integer sum of
// level * q_x, times d_w * d_x, plus m_w * s_x where kMin, added to one float
// sum in block order.
// Everything here is static or in an anonymous namespace (see format.h: no
// copy compiled for another ISA can be the one kept).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::block32 {

// Element j's nibble of 16 bytes ordered as in Q4_0: j < 16 in the low
// nibble of byte j, j + 16 in its high nibble.
static inline int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

// Q5_0 / Q5_1: element j's nibble with bit j of the little-endian uint32 at qh on top.
static inline int code5(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  return nibble(qs, j) | static_cast<int>(((h >> j) & 1u) << 4);
}

template <class B>
static void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / B::kBlockElems; ++b, blk += B::kBlockBytes, dst += B::kBlockElems) {
    const float d = B::scale(blk);
    for (int j = 0; j < B::kBlockElems; ++j) {
      if constexpr (B::kMin) {
        dst[j] = static_cast<float>(B::level(blk, j)) * d + load_fp16(blk + 2);
      } else {
        dst[j] = static_cast<float>(B::level(blk, j)) * d;
      }
    }
  }
}

template <class B>
static float vec_dot(const void* w, const void* x, int64_t n) {
  constexpr size_t kXBytes = B::kMin ? q8_1::kBlockBytes : q8_0::kBlockBytes;
  constexpr size_t kXQs = B::kMin ? 4 : 2;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / B::kBlockElems; ++b, wb += B::kBlockBytes, xb += kXBytes) {
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kXQs);
    int32_t sumi = 0;
    for (int j = 0; j < B::kBlockElems; ++j) sumi += B::level(wb, j) * xq[j];
    if constexpr (B::kMin) {
      sum += B::scale(wb) * load_fp16(xb) * static_cast<float>(sumi) + load_fp16(wb + 2) * load_fp16(xb + 2);
    } else {
      sum += B::scale(wb) * load_fp16(xb) * static_cast<float>(sumi);
    }
  }
  return sum;
}

// The 32 codes (each below 32) of a block in Q4_0's nibble order at qs, and
// for 5-bit codes their fifth bits as the little-endian uint32 at qh.
static inline void pack_nibbles(const int* code, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((code[j] & 0x0f) | ((code[j + 16] & 0x0f) << 4));
}
static inline void pack_5bit(const int* code, uint8_t* qh, uint8_t* qs) {
  pack_nibbles(code, qs);
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>((code[j] >> 4) & 1) << j;
  std::memcpy(qh, &h, sizeof h);
}

// ggml's Q4_0 / Q5_0 reference block (quantize_row_q4_0_ref, _q5_0_ref) with
// 2 * half levels: the value of largest magnitude (with its sign) maps to
// -half, d = max / -half; code = min(2 half - 1, trunc(x / d + half + 0.5))
// (ggml's int8 truncation rounds x / d + half half-up in [0, 2 half]).
// Returns d.
static inline float quantize_signed(const float* x, int half, int* code) {
  const float d = kq::largest_magnitude(x, 32).max / static_cast<float>(-half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float shift = static_cast<float>(half) + 0.5f;
  for (int j = 0; j < 32; ++j)
    code[j] = std::min(2 * half - 1, static_cast<int>(static_cast<int8_t>(x[j] * id + shift)));
  return d;
}

// ggml's Q4_1 / Q5_1 reference block (quantize_row_q4_1_ref, _q5_1_ref) with
// `levels` levels: m = min, d = (max - min) / (levels - 1), code =
// trunc((x - min) / d + 0.5), at most levels - 1 (ggml clamps Q4_1's; Q5_1's
// cannot exceed 31). Returns d, sets *min.
static inline float quantize_affine(const float* x, int levels, int* code, float* min) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j)
    code[j] = std::min(levels - 1, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
  *min = lo;
  return d;
}

// ggml's Q8_0 / Q8_1 reference block: d = amax / 127, q = round(x / d) half
// away from zero, stored at q; returns d and the sum of the q.
static inline float quantize_q8(const float* x, int8_t* q, int* sum) {
  const float d = kq::abs_max(x, q8_0::kBlockElems) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *sum = 0;
  for (int j = 0; j < q8_0::kBlockElems; ++j) {
    q[j] = static_cast<int8_t>(std::round(x[j] * id));
    *sum += q[j];
  }
  return d;
}

// quantize_row of the activation formats Q8_0 and Q8_1 (quantize_q8): fp16 d
// at byte 0, for Q8_1 (kSum) fp16 s = fp16(sum(q) * d) at byte 2, then the q.
template <bool kSum>
static void quantize_q8_row(const float* src, void* dst, int64_t n) {
  constexpr size_t kBytes = kSum ? q8_1::kBlockBytes : q8_0::kBlockBytes;
  constexpr size_t kQs = kSum ? 4 : 2;
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / q8_0::kBlockElems; ++b, blk += kBytes, src += q8_0::kBlockElems) {
    int sum;
    const float d = quantize_q8(src, reinterpret_cast<int8_t*>(blk + kQs), &sum);
    store_u16(blk, float_to_half(d));
    if constexpr (kSum) store_u16(blk + 2, float_to_half(static_cast<float>(sum) * d));
  }
}

// quantize_row of Q4_0, Q5_0 (quantize_signed) and Q4_1, Q5_1 (quantize_affine).
template <class B>
static void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / B::kBlockElems; ++b, blk += B::kBlockBytes, src += B::kBlockElems) {
    int code[32];
    if constexpr (B::kMin) {
      float min;
      store_u16(blk, float_to_half(quantize_affine(src, B::kLevels, code, &min)));
      store_u16(blk + 2, float_to_half(min));
    } else {
      store_u16(blk, float_to_half(quantize_signed(src, B::kLevels / 2, code)));
    }
    B::pack(code, blk);
  }
}

namespace {

// The blocks with an fp16 d at byte 0 (kHasMin: and an fp16 m at byte 2).
template <size_t kBytes, bool kHasMin = false>
struct Fp16Block {
  static constexpr int64_t kBlockElems = 32;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr bool kMin = kHasMin;
  static float scale(const uint8_t* blk) { return load_fp16(blk); }
};

struct Q8_0 : Fp16Block<q8_0::kBlockBytes> {
  static int level(const uint8_t* blk, int j) { return static_cast<int8_t>(blk[2 + j]); }
};

struct Q8_1 : Fp16Block<q8_1::kBlockBytes> {  // its values; s = d * sum(q) is not one
  static int level(const uint8_t* blk, int j) { return static_cast<int8_t>(blk[4 + j]); }
};

struct Q4_0 : Fp16Block<q4_0::kBlockBytes> {
  static constexpr int kLevels = 16;
  static int level(const uint8_t* blk, int j) { return nibble(blk + 2, j) - 8; }
  static void pack(const int* code, uint8_t* blk) { pack_nibbles(code, blk + 2); }
};

struct Q5_0 : Fp16Block<q5_0::kBlockBytes> {
  static constexpr int kLevels = 32;
  static int level(const uint8_t* blk, int j) { return code5(blk + 2, blk + 6, j) - 16; }
  static void pack(const int* code, uint8_t* blk) { pack_5bit(code, blk + 2, blk + 6); }
};

struct Q4_1 : Fp16Block<q4_1::kBlockBytes, true> {
  static constexpr int kLevels = 16;
  static int level(const uint8_t* blk, int j) { return nibble(blk + 4, j); }
  static void pack(const int* code, uint8_t* blk) { pack_nibbles(code, blk + 4); }
};

struct Q5_1 : Fp16Block<q5_1::kBlockBytes, true> {
  static constexpr int kLevels = 32;
  static int level(const uint8_t* blk, int j) { return code5(blk + 4, blk + 8, j); }
  static void pack(const int* code, uint8_t* blk) { pack_5bit(code, blk + 4, blk + 8); }
};

struct IQ4_NL : Fp16Block<iq4_nl::kBlockBytes> {
  static int level(const uint8_t* blk, int j) { return iq4_nl::kValues[nibble(blk + 2, j)]; }
};

struct MXFP4 : Fp16Block<mxfp4::kBlockBytes> {  // its scale is E8M0 (halved, formats.h), not fp16
  static float scale(const uint8_t* blk) { return mxfp4::scale(blk[0]); }
  static int level(const uint8_t* blk, int j) { return mxfp4::kValues[nibble(blk + 1, j)]; }
};

}  // namespace

}  // namespace ns::kernels::block32
