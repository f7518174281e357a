#include "tools/make_model/tensor_types.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace ns::make_model {

using gguf::GgmlType;

namespace {
// "blk.3.ffn_down.weight" -> "ffn_down": the part a --tensor-type pattern usually names.
std::string short_name(std::string name) {
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string::npos) name = name.substr(dot + 1);
  }
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}
}  // namespace

const std::vector<GgmlType>& encodable_types() {
  // Every weight type the kernels can quantize to (kernels::quantize_row, and
  // quantize_row_weighted for the i-quants with --imatrix), so
  // mixed-quant files like the K-quant GGUFs people download can be generated.
  static const std::vector<GgmlType> types = {
      GgmlType::F32,     GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,  GgmlType::Q4_0,    GgmlType::Q4_1,
      GgmlType::Q5_0,    GgmlType::Q5_1,   GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K,    GgmlType::Q3_K,
      GgmlType::Q4_K,    GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::Q1_0,  GgmlType::Q2_0,    GgmlType::NVFP4,
      GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ1_S,  GgmlType::IQ1_M, GgmlType::IQ3_XXS, GgmlType::IQ4_XS,
      GgmlType::TQ1_0,   GgmlType::TQ2_0};
  return types;
}

std::string encodable_type_names() {
  std::string s;
  for (GgmlType t : encodable_types()) s += (s.empty() ? "" : ", ") + std::string(gguf::type_name(t));
  return s;
}

GgmlType parse_type(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (GgmlType t : encodable_types())
    if (gguf::type_name(t) == upper) return t;
  throw Error(ErrorKind::invalid_input, "unknown tensor type '" + name + "'; choose one of " + encodable_type_names());
}

uint32_t file_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;       // LLAMA_FTYPE_ALL_F32
    case GgmlType::F16: return 1;       // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::Q4_0: return 2;      // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::Q8_0: return 7;      // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::BF16: return 32;     // LLAMA_FTYPE_MOSTLY_BF16
    case GgmlType::Q4_1: return 3;      // LLAMA_FTYPE_MOSTLY_Q4_1
    case GgmlType::Q5_0: return 8;      // LLAMA_FTYPE_MOSTLY_Q5_0
    case GgmlType::Q5_1: return 9;      // LLAMA_FTYPE_MOSTLY_Q5_1
    case GgmlType::Q2_K: return 10;     // LLAMA_FTYPE_MOSTLY_Q2_K
    case GgmlType::Q3_K: return 12;     // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case GgmlType::Q4_K: return 15;     // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case GgmlType::Q5_K: return 17;     // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case GgmlType::Q6_K: return 18;     // LLAMA_FTYPE_MOSTLY_Q6_K
    case GgmlType::IQ4_NL: return 25;   // LLAMA_FTYPE_MOSTLY_IQ4_NL
    case GgmlType::MXFP4: return 38;    // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    case GgmlType::NVFP4: return 39;    // LLAMA_FTYPE_MOSTLY_NVFP4
    case GgmlType::Q1_0: return 40;     // LLAMA_FTYPE_MOSTLY_Q1_0
    case GgmlType::Q2_0: return 41;     // LLAMA_FTYPE_MOSTLY_Q2_0
    case GgmlType::IQ2_XXS: return 19;  // LLAMA_FTYPE_MOSTLY_IQ2_XXS
    case GgmlType::IQ2_XS: return 20;   // LLAMA_FTYPE_MOSTLY_IQ2_XS
    case GgmlType::IQ1_S: return 24;    // LLAMA_FTYPE_MOSTLY_IQ1_S
    case GgmlType::IQ1_M: return 31;    // LLAMA_FTYPE_MOSTLY_IQ1_M
    case GgmlType::IQ4_XS: return 30;   // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case GgmlType::IQ3_XXS: return 23;  // LLAMA_FTYPE_MOSTLY_IQ3_XXS
    case GgmlType::TQ1_0: return 36;    // LLAMA_FTYPE_MOSTLY_TQ1_0
    case GgmlType::TQ2_0: return 37;    // LLAMA_FTYPE_MOSTLY_TQ2_0
    default: break;
  }
  throw Error(ErrorKind::internal, "no general.file_type for " + std::string(gguf::type_name(t)));
}

bool TypeOverride::matches(const std::string& tensor_name) const {
  return tensor_name.find(pattern) != std::string::npos || std::regex_search(tensor_name, regex);
}

TypeOverride parse_override(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error(ErrorKind::invalid_input,
                "--tensor-type '" + spec + "' is not PATTERN=TYPE (e.g. token_embd=Q8_0 or 'ffn_(up|gate)_exps=Q4_0')");
  TypeOverride o{spec.substr(0, eq), parse_type(spec.substr(eq + 1)), {}};
  try {
    o.regex = std::regex(o.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(ErrorKind::invalid_input, "--tensor-type '" + spec + "': the pattern is neither found as text nor a " +
                                              "valid regular expression (" + e.what() + ")");
  }
  return o;
}

GgmlType choose_type(const TensorPlan& t, GgmlType default_type, const std::vector<TypeOverride>& overrides) {
  if (t.i32) return GgmlType::I32;
  if (t.always_f32 || t.dims.size() < 2) return GgmlType::F32;
  GgmlType type = default_type;
  for (const auto& o : overrides)
    if (o.matches(t.name)) type = o.type;
  const auto& tt = gguf::traits(type);
  if (t.dims[0] % tt.block_elems != 0)
    throw Error(ErrorKind::invalid_input,
                "tensor '" + t.name + "' has rows of " + std::to_string(t.dims[0]) + " elements, not a multiple of " +
                    std::string(tt.name) + "'s block of " + std::to_string(tt.block_elems) +
                    ": change the shape or give it another type (--tensor-type " + short_name(t.name) + "=F16)");
  return type;
}

}  // namespace ns::make_model
