// Generates small random-weight models for engine tests with the project's
// own generator binary (built alongside the tests), cached per build.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace ns::test {

inline std::string make_model(const std::string& name, const std::string& flags) {
  const std::filesystem::path dir = std::filesystem::path(NS_BINARY_DIR) / "test-models";
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / (name + ".gguf");
  if (!std::filesystem::exists(out)) {
    const std::string tmp = out.string() + ".tmp";
    const std::string cmd = std::string(NS_BINARY_DIR) + "/tools/nightshift-make-model " + flags + " --out " + tmp +
                            " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("model generator failed: " + cmd);
    std::filesystem::rename(tmp, out);
  }
  return out.string();
}

// Small dense and MoE llama models.
inline std::string dense_model() {
  return make_model("dense-q8", "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type Q8_0 --seed 3");
}
inline std::string moe_model() {
  return make_model("moe-q4", "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 --n-expert 8 "
                              "--n-expert-used 2 --type Q4_0 --seed 4");
}

}  // namespace ns::test
