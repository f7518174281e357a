// Which ggml type each generated tensor gets: --type for all, --tensor-type
// PATTERN=TYPE overrides (the last matching one wins), norms and routers
// always F32.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "tools/make_model/architecture.h"

namespace ns::make_model {

// The types the generator can encode (kernels::quantize_row supports them).
const std::vector<gguf::GgmlType>& encodable_types();
std::string encodable_type_names();  // "F32, F16, BF16, Q8_0, Q4_0"
// Case-insensitive; throws ns::Error(invalid_input) listing the choices.
gguf::GgmlType parse_type(const std::string& name);
// general.file_type (llama.cpp's llama_ftype) of a model mostly in `t`.
uint32_t file_type_of(gguf::GgmlType t);

// PATTERN=TYPE. A tensor matches if PATTERN is a substring of its name or,
// failing that, an ECMAScript regular expression found in it.
struct TypeOverride {
  std::string pattern;
  gguf::GgmlType type;
  std::regex regex;
  bool matches(const std::string& tensor_name) const;
};
TypeOverride parse_override(const std::string& spec);  // throws invalid_input

// The type of `t`; throws invalid_input if its rows do not fit the type's
// blocks (naming the tensor and how to fix it).
gguf::GgmlType choose_type(const TensorPlan& t, gguf::GgmlType default_type,
                           const std::vector<TypeOverride>& overrides);

}  // namespace ns::make_model
