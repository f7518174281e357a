// IQ1_S: super-blocks of 256 weights in 8 sub-blocks of 32, each 4 groups of
// 8 values from an 11-bit index into a 2048-entry grid of -1, 0, 1, shifted
// by +-1/8 per sub-block and scaled by a 3-bit sub-block scale; one fp16
// super-scale (1.56 bits per weight). Layout: iquant.h. Scalar reference,
// bit-exact with ggml's dequantize_row_iq1_s; dotted against Q8_K in ggml's
// integer order, the shift through the activations' bsums.
// Read-only: quantizing needs ggml's importance-matrix grid search.
// The loops are iquant.h's iq1_dequantize / iq1_vec_dot; this file holds
// the block decoding.
#include "engine/kernels/formats.h"
#include "engine/kernels/iquant.h"

namespace ns::kernels::iq1_s {
namespace {

// One scale and one delta sign per sub-block, both in qh[v]; the dot takes
// a half's activation sum from the Q8_K bsums, as ggml does.
struct Group {
  using L = iq::Iq1s;
  static float d(const uint8_t* blk) { return load_fp16(blk + L::d); }
  static int index(const uint8_t* blk, int v, int l) { return iq::iq1s_index(blk, v, l); }
  static bool negative_delta(const uint8_t* blk, int v, int) { return iq::iq1s_negative_delta(iq::iq1s_qh(blk, v)); }
  static int scale(const uint8_t* blk, int v, int) { return iq::iq1s_scale(iq::iq1s_qh(blk, v)); }
  static int32_t delta_xsum(const uint8_t* blk, const uint8_t* xb, const int8_t*, int v, int half) {
    const int32_t xs = kq::load_i16(xb + kq::Q8K::bsums + 4 * v + 2 * half);
    return negative_delta(blk, v, half) ? -xs : xs;
  }
};
static_assert(Group::L::bytes == kBlockBytes);

}  // namespace

void dequantize(const void* src, float* dst, int64_t n) { iq::iq1_dequantize<Group>(src, dst, n); }
float vec_dot(const void* w, const void* x, int64_t n) { return iq::iq1_vec_dot<Group>(w, x, n); }

}  // namespace ns::kernels::iq1_s
