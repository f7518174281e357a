// Small random-weight models written by the project's generator
// (build/tools/nightshift-make-model), cached per build directory. Tests skip
// with a message when the generator has not been built.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/unit/engine/test_models.h"

namespace ns::test {

inline bool have_generator() {
  const std::filesystem::path gen = std::filesystem::path(NS_BINARY_DIR) / "tools" / "nightshift-make-model";
  if (std::filesystem::exists(gen)) return true;
  MESSAGE("skipping: " << gen.string() << " is not built (cmake --build ... --target nightshift-make-model)");
  return false;
}

// A 2-layer dense llama, fast (thousands of tokens/s). Named for these tests
// alone: two test binaries run in parallel must not write one cache file at once.
inline std::optional<std::string> small_model() {
  if (!have_generator()) return std::nullopt;
  return make_model("daemon-small-q8",
                    "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type Q8_0 --seed 3");
}

// Wider and deeper: a few hundred tokens/s on one core, so a job of a few
// hundred tokens is still running when a test acts on it.
inline std::optional<std::string> slow_model() {
  if (!have_generator()) return std::nullopt;
  return make_model("daemon-slow-q8",
                    "--arch llama --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 768 --n-ctx 4096 "
                    "--type Q8_0 --seed 5");
}

}  // namespace ns::test
