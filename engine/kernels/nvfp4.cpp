// NVFP4: blocks of 64 E2M1 codes in four 16-element sub-blocks, each with a
// UE4M3 scale byte; x = nvfp4::scale(e[s]) * mxfp4::kValues[nibble] (ggml's
// halved scale times its doubled table, see formats.h). Scalar reference;
// dotted against Q8_0 (two activation blocks per weight block) as in ggml,
// whose generic vec_dot this follows: per sub-block, d_x * d_w times the
// exact sum, added to the total.
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"

namespace ns::kernels::nvfp4 {

const ScaleTable kScales = [] {
  ScaleTable t{};
  for (int e = 0; e < 256; ++e) t.value[e] = scale_of(static_cast<uint8_t>(e));
  return t;
}();

namespace {

constexpr int kSubBlocks = kBlockElems / kSubElems;
constexpr int kSubBytes = kSubElems / 2;

// ggml_fp32_to_ue4m3 for x = amax / 6: 0 for x <= 0 (and NaN); x above 448
// (the largest E4M3 value) is clamped to it; normal values round their
// mantissa to 3 bits half up, and a result with exponent field 15 is 0x7e
// (448) whatever its mantissa, as there; below 2^-6 the subnormal steps of
// 2^-9, rounded half up, and nothing under half a step.
uint8_t to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int e = static_cast<int>((bits >> 23) & 0xff) - 127 + 7;
  if (e <= 0) {
    const int m = static_cast<int>(x * 512.0f + 0.5f);
    return m < 1 ? uint8_t{0} : static_cast<uint8_t>(m > 7 ? 7 : m);
  }
  if (e >= 15) return 0x7e;
  int m = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);
  if (m > 7) {
    m = 0;
    if (++e >= 15) return 0x7e;
  }
  return static_cast<uint8_t>(e << 3 | m);
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    for (int s = 0; s < kSubBlocks; ++s, dst += kSubElems) {
      const float d = scale(blk[s]);
      const uint8_t* qs = blk + kSubBlocks + s * kSubBytes;
      for (int j = 0; j < kSubBytes; ++j) {
        dst[j] = static_cast<float>(mxfp4::kValues[qs[j] & 0x0f]) * d;
        dst[j + kSubBytes] = static_cast<float>(mxfp4::kValues[qs[j] >> 4]) * d;
      }
    }
  }
}

// ggml's quantize_row_nvfp4_ref: per sub-block, the scale byte from amax / 6
// (6 is E2M1's largest value), then each value's nearest code under that
// scale (MXFP4's choice, no search, no weights).
void quantize(const float* src, void* dst, int64_t n) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes) {
    for (int s = 0; s < kSubBlocks; ++s, src += kSubElems) {
      float amax = 0;
      for (int j = 0; j < kSubElems; ++j)
        if (amax < std::fabs(src[j])) amax = std::fabs(src[j]);
      blk[s] = to_ue4m3(amax / 6.0f);
      const float d = scale(blk[s]);
      uint8_t* qs = blk + kSubBlocks + s * kSubBytes;
      for (int j = 0; j < kSubBytes; ++j)
        qs[j] = static_cast<uint8_t>(mxfp4::best_index(src[j], d) | mxfp4::best_index(src[j + kSubBytes], d) << 4);
    }
  }
}

float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes) {
    for (int s = 0; s < kSubBlocks; ++s) {
      const uint8_t* xa = xb + (2 * b + s / 2) * q8_0::kBlockBytes;
      const auto* xq = reinterpret_cast<const int8_t*>(xa + 2) + (s % 2) * kSubElems;
      const uint8_t* qs = wb + kSubBlocks + s * kSubBytes;
      int32_t lo = 0, hi = 0;
      for (int j = 0; j < kSubBytes; ++j) {
        lo += xq[j] * mxfp4::kValues[qs[j] & 0x0f];
        hi += xq[j + kSubBytes] * mxfp4::kValues[qs[j] >> 4];
      }
      sum += load_fp16(xa) * scale(wb[s]) * static_cast<float>(lo + hi);
    }
  }
  return sum;
}

}  // namespace ns::kernels::nvfp4
