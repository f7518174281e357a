#include "engine/gguf/ggml_type.h"

#include <array>

namespace ns::gguf {
namespace {

constexpr std::array kTypes = {
    TypeTraits{GgmlType::F32, "F32", 1, 4},
    TypeTraits{GgmlType::F16, "F16", 1, 2},
    TypeTraits{GgmlType::Q4_0, "Q4_0", 32, 18},
    TypeTraits{GgmlType::Q4_1, "Q4_1", 32, 20},
    TypeTraits{GgmlType::Q5_0, "Q5_0", 32, 22},
    TypeTraits{GgmlType::Q5_1, "Q5_1", 32, 24},
    TypeTraits{GgmlType::Q8_0, "Q8_0", 32, 34},
    TypeTraits{GgmlType::Q8_1, "Q8_1", 32, 36},
    TypeTraits{GgmlType::Q2_K, "Q2_K", 256, 84},
    TypeTraits{GgmlType::Q3_K, "Q3_K", 256, 110},
    TypeTraits{GgmlType::Q4_K, "Q4_K", 256, 144},
    TypeTraits{GgmlType::Q5_K, "Q5_K", 256, 176},
    TypeTraits{GgmlType::Q6_K, "Q6_K", 256, 210},
    TypeTraits{GgmlType::Q8_K, "Q8_K", 256, 292},
    TypeTraits{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    TypeTraits{GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    TypeTraits{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    TypeTraits{GgmlType::IQ1_S, "IQ1_S", 256, 50},
    TypeTraits{GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    TypeTraits{GgmlType::IQ3_S, "IQ3_S", 256, 110},
    TypeTraits{GgmlType::IQ2_S, "IQ2_S", 256, 82},
    TypeTraits{GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    TypeTraits{GgmlType::I8, "I8", 1, 1},
    TypeTraits{GgmlType::I16, "I16", 1, 2},
    TypeTraits{GgmlType::I32, "I32", 1, 4},
    TypeTraits{GgmlType::I64, "I64", 1, 8},
    TypeTraits{GgmlType::F64, "F64", 1, 8},
    TypeTraits{GgmlType::IQ1_M, "IQ1_M", 256, 56},
    TypeTraits{GgmlType::BF16, "BF16", 1, 2},
    TypeTraits{GgmlType::TQ1_0, "TQ1_0", 256, 54},
    TypeTraits{GgmlType::TQ2_0, "TQ2_0", 256, 66},
    TypeTraits{GgmlType::MXFP4, "MXFP4", 32, 1 + 16},
    TypeTraits{GgmlType::NVFP4, "NVFP4", 64, 4 + 32},
    TypeTraits{GgmlType::Q1_0, "Q1_0", 128, 2 + 16},
    TypeTraits{GgmlType::Q2_0, "Q2_0", 64, 2 + 16},
};
// In-memory layouts: a row's bytes as in the file type, rows permuted in groups.
constexpr std::array kInternal = {TypeTraits{GgmlType::Q4_0_R16, "Q4_0_R16", 32, 18}};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type_id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  return std::nullopt;
}

const TypeTraits& traits(GgmlType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  for (const auto& t : kInternal)
    if (t.type == type) return t;
  return kTypes[0];  // unreachable for enum values listed above
}

std::string_view type_name(GgmlType t) { return traits(t).name; }

}  // namespace ns::gguf
