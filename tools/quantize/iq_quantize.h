// The importance-weighted quantizers of the i-quants (ggml-quants.c's
// quantize_row_*_impl), one file per format (iq*_quantize.cpp) over the
// searches in iq_quant_search.h. `importance` holds one non-negative weight
// per column (n floats: llama-imatrix's mean squared activation of that input
// feature, as llama-quantize derives it); every row of a matrix uses the same
// vector. Callers go through kernels::quantize_row_weighted (quantize_weighted.h).
#pragma once

#include <cstdint>

namespace ns::kernels {

// importance required (as in ggml):
namespace iq2_xxs {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}
namespace iq2_xs {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}
namespace iq1_s {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}
// importance may be null: the weights are then x^2 (as in ggml; for IQ4_XS
// ggml's quantize_row_iq4_xs_ref):
namespace iq1_m {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}
namespace iq3_xxs {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}
namespace iq4_xs {
void quantize_weighted(const float* src, void* dst, int64_t n, const float* importance);
}

}  // namespace ns::kernels
