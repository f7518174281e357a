// Importance-weighted quantization, as llama-quantize with an importance
// matrix: only the model generator (tools/make_model), the kernel bench and
// the tests write such files, so these quantizers live beside the generator
// and the engine only reads the formats (engine/kernels/kernels.h).
//
// Contract: `importance` is one weight per column (n floats, the same for
// every row). Importance::used: the type's quantizer here takes it (IQ2_XXS,
// IQ2_XS, IQ1_S, IQ1_M, IQ3_XXS, IQ4_XS; the first three need it); ignored:
// ggml's quantizer ignores it too (F32, F16, BF16, Q8_0, MXFP4, TQ1_0,
// TQ2_0), so kernels::quantize_row gives llama-quantize's bytes with or
// without one; unsupported: ggml's quantizer would use it but this build's
// does not (the K-quants, Q4_0..Q5_1, IQ4_NL): quantize those without an
// importance matrix, or their bytes differ from llama-quantize's.
// quantize_row_weighted throws ns::Error (invalid_input) for a null
// importance where the type needs one, and for an unsupported type.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace ns::kernels {

enum class Importance { used, ignored, unsupported };
Importance importance_use(GgmlType t);
bool needs_importance(GgmlType t);
void quantize_row_weighted(GgmlType t, const float* src, void* dst, int64_t n, const float* importance);

}  // namespace ns::kernels
