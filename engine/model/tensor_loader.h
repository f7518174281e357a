// Looks up a model's tensors by name and checks each against the shape and
// types the architecture expects, so a wrong or corrupt file fails at load
// with "tensor X: expected [a, b], file has [c, d]" rather than mid-forward.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernels.h"

namespace ns {

// A stack of same-shaped matrices, one per expert, stored back to back
// (GGUF dims [cols, rows, n_expert]).
struct ExpertsView {
  gguf::GgmlType type = gguf::GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_expert = 0, rows = 0, cols = 0;
  size_t row_stride = 0, expert_stride = 0;
  uint64_t file_offset = 0;  // where expert 0 starts in the GGUF file

  kernels::MatrixView expert(int64_t e) const {
    return {type, data + static_cast<size_t>(e) * expert_stride, rows, cols, row_stride};
  }
};

class TensorLoader {
 public:
  explicit TensorLoader(const gguf::GgufFile& file) : f_(file) {}

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  // A weight matrix with `rows` outputs and `cols` inputs (GGUF dims [cols, rows]).
  kernels::MatrixView matrix(const std::string& name, int64_t rows, int64_t cols);
  ExpertsView experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols);
  // A 1-D tensor of n values (norm weights, biases), converted to F32.
  std::vector<float> vector(const std::string& name, int64_t n);
  // The same, or an empty vector when the file has no such tensor (optional biases and norms).
  std::vector<float> vector_if_present(const std::string& name, int64_t n) {
    return has(name) ? vector(name, n) : std::vector<float>{};
  }
  // Any small tensor of shape `dims`, all its values converted to F32.
  // Dimensions of 1 may be present or not, anywhere (converters write conv
  // weights as [d_conv, 1, d_inner, 1] and quantizers drop the last 1;
  // kimi-linear's ssm_a is [1, n_head, 1, 1], kimi-k3's [n_head]).
  std::vector<float> values(const std::string& name, std::vector<uint64_t> dims);

  // Marks every tensor whose name starts with `prefix` as deliberately not
  // loaded (the NextN blocks): unused() leaves them out. Returns how many.
  size_t skip(const std::string& prefix);

  // Names of tensors in the file that no lookup asked for and skip() did not
  // cover (an architecture mismatch shows up here).
  std::vector<std::string> unused() const;
  // The tensors lookups asked for, in file order: what the model runs on, and
  // all the memory plan counts (skipped tensors are neither read nor planned).
  std::vector<gguf::TensorInfo> used_tensors() const;

 private:
  const gguf::TensorInfo& require(const std::string& name, const std::vector<uint64_t>& dims);
  const gguf::GgufFile& f_;
  std::set<std::string> used_;
  std::vector<std::string> skipped_prefixes_;
};

}  // namespace ns
