// MXFP4 weights x Q8_0 activations, AVX2: the table-lookup kernel shared with
// IQ4_NL (table4_avx2.h) under MXFP4's E8M0 block scale. ggml's x86 kernel
// for MXFP4 is IQ4_NL's with the other table and scale, float order included.
#include "engine/kernels/table4_avx2.h"

namespace ns::kernels::mxfp4_avx2 {
namespace {

struct Format {
  static constexpr int64_t kBlockElems = mxfp4::kBlockElems;
  static constexpr size_t kBlockBytes = mxfp4::kBlockBytes;
  static constexpr size_t kQsOffset = 1;
  static constexpr const int8_t* kValues = mxfp4::kValues;
  static float scale(const uint8_t* block) { return mxfp4::scale(block[0]); }
};
using Kernels = avx2::Table4Kernels<Format>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::mxfp4_avx2
