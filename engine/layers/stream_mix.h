// A weighted sum of rows, element by element, as the reference's DeepSeek V4
// hyper-connection ops sum them on the CPU (ggml's dsv4_hc_pre and
// dsv4_hc_post, and the head's mul/add chain):
//   out[i] = ((rows[0][i] * w[0] + rows[1][i] * w[1]) + rows[2][i] * w[2]) + ...
// every product and every sum rounded on its own (that code has no fused
// multiply-add: checked in its compiled form), rows in order. Each element is
// independent, so the AVX2 (8 elements at a time) and AVX-512 (16) paths
// make the same roundings in the same order as the scalar loop: the same
// bits (tests/unit/engine/stream_mix_test.cpp).
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace ns {

// out[d] from n_rows rows (pointers; out may be one of them: each element is read before it is written). isa
// clamped to the CPU's.
void mix_rows(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out, kernels::Isa isa);
void mix_rows(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out);  // the active ISA
// The scalar loop (the reference of the two above).
void mix_rows_reference(const float* const* rows, const float* w, int64_t n_rows, int64_t d, float* out);

}  // namespace ns
