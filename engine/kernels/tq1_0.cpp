// TQ1_0: ternary super-blocks of 256 weights packed 5 to a byte as base-3
// digits (-1, 0, 1 stored as 0..2), one fp16 scale (1.69 bits per weight;
// BitNet-style models). Layout and digit order: iquant.h. Scalar reference,
// bit-exact with ggml's dequantize_row_tq1_0; dotted against Q8_K in ggml's
// integer order.
// Read-only in nightshift: the engine only computes with such weights.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kquant.h"

namespace ns::kernels::tq1_0 {
namespace {

using L = iq::Tq1;
static_assert(L::bytes == kBlockBytes);

// The 256 weights of a block (digit - 1) in element order.
void unpack(const uint8_t* blk, int8_t* w) {
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qs + m], n) - 1);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qs + 32 + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) *w++ = static_cast<int8_t>(iq::tq1_digit(blk[L::qh + j], n) - 1);
}

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b, blk += kBlockBytes, dst += kBlockElems) {
    const float d = load_fp16(blk + L::d);
    int8_t w[kBlockElems];
    unpack(blk, w);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = static_cast<float>(w[e]) * d;
  }
}

// Per super-block the exact sum of w * x, times d_w d_x.
float vec_dot(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlockElems; ++b, wb += kBlockBytes, xb += q8_k::kBlockBytes) {
    const auto* q8 = reinterpret_cast<const int8_t*>(xb + kq::Q8K::qs);
    int8_t wv[kBlockElems];
    unpack(wb, wv);
    int32_t s = 0;
    for (int e = 0; e < kBlockElems; ++e) s += wv[e] * q8[e];
    sum += static_cast<float>(s) * (load_fp16(wb + L::d) * kq::load_f32(xb + kq::Q8K::d));
  }
  return sum;
}

}  // namespace ns::kernels::tq1_0
