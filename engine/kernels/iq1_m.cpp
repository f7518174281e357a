// IQ1_M: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 values from an 11-bit index into IQ1_S's grid of -1, 0, 1, each group
// shifted by its own +-1/8, a 3-bit scale per 16 weights, and an fp16
// super-scale spread over the scale words' top nibbles (1.75 bits per
// weight). Layout: iquant.h. Scalar reference, bit-exact with ggml's
// dequantize_row_iq1_m; dotted against Q8_K in ggml's integer order.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's iq1_dequantize / iq1_vec_dot; this file holds
// the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq1_m {
namespace {

// A delta sign per group and a scale per half sub-block; d from the scale
// words' top nibbles. A half's delta sum adds each group's activations with
// its own sign.
struct Group {
  using L = iq::Iq1m;
  static float d(const uint8_t* blk) { return fp16_table.value[iq::iq1m_d_bits(blk)]; }
  static int index(const uint8_t* blk, int v, int l) { return iq::iq1m_index(blk, v, l); }
  static bool negative_delta(const uint8_t* blk, int v, int l) { return iq::iq1m_negative_delta(blk, v, l); }
  static int scale(const uint8_t* blk, int v, int half) { return iq::iq1m_scale(blk, v, half); }
  static int32_t delta_xsum(const uint8_t* blk, const uint8_t*, const int8_t* q8, int v, int half) {
    int32_t sd = 0;
    for (int g = 0; g < 2; ++g, q8 += 8) {
      int32_t xs = 0;
      for (int j = 0; j < 8; ++j) xs += q8[j];
      sd += negative_delta(blk, v, 2 * half + g) ? -xs : xs;
    }
    return sd;
  }
};
static_assert(Group::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::iq1_dequantize<Group>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::iq1_vec_dot<Group>(w, x, n); }

}  // namespace ns::kernels::iq1_m
