// kernels::quantize_row_weighted (quantize_weighted.h): the importance-weighted
// quantizers (iq_quantize.h) and which types take, ignore or would need an
// importance matrix, as ggml_quantize_chunk treats its quant_weights.
#include "tools/quantize/quantize_weighted.h"

#include <string>

#include "common/error.h"
#include "engine/kernels/format.h"
#include "tools/quantize/iq_quantize.h"

namespace ns::kernels {

namespace {
using WeightedFn = void (*)(const float*, void*, int64_t, const float*);
WeightedFn weighted(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: return iq2_xxs::quantize_weighted;
    case GgmlType::IQ2_XS: return iq2_xs::quantize_weighted;
    case GgmlType::IQ1_S: return iq1_s::quantize_weighted;
    case GgmlType::IQ1_M: return iq1_m::quantize_weighted;
    case GgmlType::IQ4_XS: return iq4_xs::quantize_weighted;
    case GgmlType::IQ3_XXS: return iq3_xxs::quantize_weighted;
    default: return nullptr;
  }
}
}  // namespace

Importance importance_use(GgmlType t) {
  if (weighted(t)) return Importance::used;
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0: return Importance::ignored;
    default: return Importance::unsupported;
  }
}

bool needs_importance(GgmlType t) { return t == GgmlType::IQ2_XXS || t == GgmlType::IQ2_XS || t == GgmlType::IQ1_S; }

void quantize_row_weighted(GgmlType t, const float* src, void* dst, int64_t n, const float* importance) {
  if (WeightedFn f = weighted(t)) {
    require_whole_blocks(t, n, "quantize_row_weighted");
    f(src, dst, n, importance);
    return;
  }
  if (importance != nullptr && importance_use(t) == Importance::unsupported)
    throw Error(ErrorKind::invalid_input,
                "quantize_row_weighted: nightshift quantizes " + std::string(gguf::type_name(t)) +
                    " without an importance matrix, so its bytes would differ from llama-quantize's with one: "
                    "leave this tensor out of the importance matrix (llama-quantize --exclude-weights) or choose "
                    "another type");
  quantize_row(t, src, dst, n);
}

}  // namespace ns::kernels
