// IQ4_XS quantizer, ggml's quantize_row_iq4_nl_impl for super-blocks of 256
// in blocks of 32 with 7 tries (importance optional: the weights are x^2
// without it, which is ggml's quantize_row_iq4_xs_ref). Per block: the value
// of largest magnitude maps to the level -127 (or +127), every value takes its
// nearest of the 16 non-linear levels, and 15 scales around that are tried for
// the best weighted least-squares fit. The super-block scale is the largest
// block scale / -32; each block keeps a 6-bit multiple and its values are
// re-snapped under it. Layout: iquant.h; levels: iq4_nl::kValues.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/formats.h"
#include "engine/kernels/half.h"
#include "tools/quantize/iq_quant_search.h"
#include "tools/quantize/iq_quantize.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant_search.h"

namespace ns::kernels::iq4_xs {
namespace {

constexpr int kBlock = 32;
constexpr int kTries = 7;
const int8_t* const kLevels = iq4_nl::kValues;

// ggml's best_index_int8 over the 16 sorted levels, in its own float
// comparisons (ties go to the upper level).
int best_index(float x) {
  if (x <= static_cast<float>(kLevels[0])) return 0;
  if (x >= static_cast<float>(kLevels[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < static_cast<float>(kLevels[mid]))
      hi = mid;
    else
      lo = mid;
  }
  return x - static_cast<float>(kLevels[hi - 1]) < static_cast<float>(kLevels[hi]) - x ? hi - 1 : hi;
}

// The weighted least-squares sums of x against the levels it snaps to under id.
void fit_sums(const float* xb, const float* weight, float id, float& sumqx, float& sumq2, uint8_t* L) {
  sumqx = sumq2 = 0;
  for (int j = 0; j < kBlock; ++j) {
    const int l = best_index(id * xb[j]);
    if (L) L[j] = static_cast<uint8_t>(l);
    const auto q = static_cast<float>(kLevels[l]);
    sumqx += weight[j] * q * xb[j];
    sumq2 += weight[j] * q * q;
  }
}

}  // namespace

void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / iq::kElems; ++b, blk += iq::Iq4xs::bytes) {
    const float* x = src + iq::kElems * b;
    const float* qw = importance ? importance + iq::kElems * b : nullptr;
    std::memset(blk, 0, iq::Iq4xs::bytes);
    float sigma2 = iq::sum_squares(x, iq::kElems);
    sigma2 *= 2.f / static_cast<float>(iq::kElems);
    uint8_t L[iq::kElems] = {};
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const float* xb = x + kBlock * ib;
      float weight[kBlock];
      if (qw)
        iq::importance_weights(kBlock, qw + kBlock * ib, xb, sigma2, weight);
      else
        for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
      const auto [amax, max] = kq::largest_magnitude(xb, kBlock);
      scales[ib] = 0;
      if (amax < kq::kGroupMaxEps) continue;
      float d = -max / static_cast<float>(kLevels[0]);
      float sumqx, sumq2;
      fit_sums(xb, weight, 1 / d, sumqx, sumq2, L + kBlock * ib);
      d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
      float best = d * sumqx;
      for (int itry = -kTries; itry <= kTries; ++itry) {
        fit_sums(xb, weight, static_cast<float>(itry + kLevels[0]) / max, sumqx, sumq2, nullptr);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
      scales[ib] = d;
      if (std::fabs(d) > amax_scale) {
        amax_scale = std::fabs(d);
        max_scale = d;
      }
    }
    const float d = -max_scale / 32;
    store_u16(blk + iq::Iq4xs::d, float_to_half(d));
    const float id = d != 0.0f ? 1 / d : 0.f;
    uint16_t scales_h = 0;
    for (int ib = 0; ib < 8; ++ib) {
      int l = std::clamp(kq::nearest_int(id * scales[ib]), -32, 31);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.f;
      for (int j = 0; j < kBlock; ++j) L[kBlock * ib + j] = static_cast<uint8_t>(best_index(idl * x[kBlock * ib + j]));
      l += 32;
      blk[iq::Iq4xs::scales_l + ib / 2] |= static_cast<uint8_t>((l & 0xf) << (4 * (ib % 2)));
      scales_h = static_cast<uint16_t>(scales_h | ((l >> 4) << (2 * ib)));
    }
    store_u16(blk + iq::Iq4xs::scales_h, scales_h);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 16; ++j)
        blk[iq::Iq4xs::qs + 16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
  }
}

}  // namespace ns::kernels::iq4_xs
