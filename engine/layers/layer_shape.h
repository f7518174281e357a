// What the layers' *_shape(hp) functions share: a size read from the model's
// metadata that must be there. A shape that does not fit stops the load with
// Error(bad_model) naming the layer, the key and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"
#include "engine/spec/hparams.h"

namespace ns {

// `value`, read from metadata key "<hp.arch>.<key>"; throws bad_model
// "<layer>: metadata key '<arch>.<key>' is missing or 0" unless it is positive.
inline int64_t required_key(const Hparams& hp, int64_t value, std::string_view key, std::string_view layer) {
  if (value <= 0)
    throw Error(ErrorKind::bad_model,
                std::string(layer) + ": metadata key '" + hp.arch + "." + std::string(key) + "' is missing or 0");
  return value;
}

}  // namespace ns
