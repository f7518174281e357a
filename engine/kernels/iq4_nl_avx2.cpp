// IQ4_NL weights x Q8_0 activations, AVX2: the table-lookup kernel shared
// with MXFP4 (table4_avx2.h) under IQ4_NL's fp16 block scale.
#include "engine/kernels/table4_avx2.h"

namespace ns::kernels::iq4_nl_avx2 {
namespace {

struct Format {
  static constexpr int64_t kBlockElems = iq4_nl::kBlockElems;
  static constexpr size_t kBlockBytes = iq4_nl::kBlockBytes;
  static constexpr size_t kQsOffset = 2;
  static constexpr const int8_t* kValues = iq4_nl::kValues;
  static float scale(const uint8_t* block) { return load_fp16(block); }
};
using Kernels = avx2::Table4Kernels<Format>;

}  // namespace

float vec_dot(const void* w, const void* x, int64_t n) { return Kernels::vec_dot(w, x, n); }

void tile(const Tile& t) { Kernels::tile(t); }

}  // namespace ns::kernels::iq4_nl_avx2
