// Looks up a model's tensors by name and checks each against the shape and
// types the architecture expects, so a wrong or corrupt file fails at load
// with "tensor X: expected [a, b], file has [c, d]" rather than mid-forward.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/gguf/gguf_set.h"
#include "engine/kernels/kernels.h"
#include "engine/spec/tensor_role.h"

namespace ns {

// A stack of same-shaped matrices, one per expert, stored back to back
// (GGUF dims [cols, rows, n_expert]).
struct ExpertsView {
  gguf::GgmlType type = gguf::GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_expert = 0, rows = 0, cols = 0;
  size_t row_stride = 0, expert_stride = 0;
  uint32_t file = 0;         // the model file (shard) holding the stack (gguf_set.h)
  uint64_t file_offset = 0;  // where expert 0 starts in that file

  kernels::MatrixView expert(int64_t e) const {
    return {type, data + static_cast<size_t>(e) * expert_stride, rows, cols, row_stride};
  }
};

class TensorLoader {
 public:
  // The tensors of `files` (one file or a split set's shards: tensor_data and
  // copy_out find each tensor's shard).
  explicit TensorLoader(const gguf::GgufSet& files) : f_(files) {}

  // Resident matrices in the kernels' interleaved layout (kernels::repacked_type:
  // Q4_0 -> Q4_0_R16, the layout the expert cache lands experts in, the same
  // switch: EngineOptions::repack_experts). off: every matrix is a view of
  // the mapping in the file's layout. copy: matrix(..., repackable) copies such
  // a tensor out of the mapping into a buffer the loader owns
  // (GgufSet::copy_out, which drops the mapping's pages of it: RSS holds one
  // copy), repacks it there and returns a view of it with the repacked type.
  // count: the same tensors are counted in repacked_bytes() but stay views of
  // the mapping (a memory plan of a model that will not run: `model info`).
  enum class Repack { off, count, copy };
  void set_repack(Repack mode) { repack_ = mode; }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  // A weight matrix with `rows` outputs and `cols` inputs (GGUF dims [cols, rows]).
  // repackable: the caller reads it only as a matmul's weight matrix (never
  // by rows or row slices), so it may be repacked (set_repack).
  kernels::MatrixView matrix(const std::string& name, int64_t rows, int64_t cols, bool repackable = false);
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
  // An I32 tensor of these dims, its values (throws bad_model for another type).
  std::vector<int32_t> ids(const std::string& name, const std::vector<uint64_t>& dims);

  // Marks every tensor whose name starts with `prefix` as deliberately not
  // loaded (the NextN blocks): unused() leaves them out. Returns how many.
  size_t skip(const std::string& prefix);

  // Names of tensors in the file that no lookup asked for and skip() did not
  // cover (an architecture mismatch shows up here).
  std::vector<std::string> unused() const;
  // The tensors lookups asked for, in file order: what the model runs on, and
  // all the memory plan counts (skipped tensors are neither read nor planned).
  std::vector<gguf::TensorInfo> used_tensors() const;

  // The role and block (-1: none) an architecture's table gives a tensor it
  // loaded (TensorTable::load tells the loader). A tensor looked up without a
  // table has no role, and is resident.
  void note_role(const std::string& name, TensorRole role, int64_t block);
  // The used tensors split by their role (tensor_role.h), each in file order:
  // the routed stacks, which the expert cache streams, and the resident rest.
  std::vector<gguf::TensorInfo> routed_tensors() const;
  std::vector<gguf::TensorInfo> resident_tensors() const;
  // Block il's router (role router) at [il] as a view of the mapping, for
  // n_block blocks; rows == 0 where a block has none (a dense layer).
  std::vector<kernels::MatrixView> routers(int64_t n_block) const;

  // Bytes of the matrices repacked (Repack::copy) or that would be
  // (Repack::count), and how many: resident weights like the others (the
  // memory plan counts every resident tensor), only held in owned buffers.
  uint64_t repacked_bytes() const { return repacked_bytes_; }
  size_t repacked_tensors() const { return repacked_.size(); }
  // The owned buffers the repacked views point into, for the model to keep
  // as long as it uses the views (the loader then holds none).
  std::vector<std::unique_ptr<uint8_t[]>> take_owned() { return std::move(owned_); }

 private:
  const gguf::TensorInfo& require(const std::string& name, const std::vector<uint64_t>& dims);
  kernels::MatrixView mapped(const gguf::TensorInfo& t, int64_t rows, int64_t cols) const;
  std::vector<gguf::TensorInfo> used_where(bool routed) const;
  struct Use {
    TensorRole role;
    int64_t block;
  };
  std::map<std::string, Use> roles_;
  const gguf::GgufSet& f_;
  std::set<std::string> used_;
  std::vector<std::string> skipped_prefixes_;
  Repack repack_ = Repack::off;
  std::map<std::string, kernels::MatrixView> repacked_;  // by name: a second request shares the first copy
  std::vector<std::unique_ptr<uint8_t[]>> owned_;
  uint64_t repacked_bytes_ = 0;
};

}  // namespace ns
