#include "engine/spec/tensor_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace ns {
namespace {

std::string dims_string(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

const gguf::TensorInfo& TensorLoader::require(const std::string& name, const std::vector<uint64_t>& dims) {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (!t)
    throw Error(ErrorKind::bad_model, f_.path() + ": tensor '" + name + "' " + dims_string(dims) +
                                          " is missing (is the file complete, and of the architecture it claims?)");
  if (t->dims != dims)
    throw Error(ErrorKind::bad_model, f_.path() + ": tensor '" + name + "': expected shape " + dims_string(dims) +
                                          ", the file has " + t->shape_string());
  if (!kernels::is_supported(t->type))
    throw Error(ErrorKind::bad_model, f_.path() + ": tensor '" + name + "' has type " +
                                          std::string(gguf::type_name(t->type)) +
                                          ", which this build cannot compute with");
  used_.insert(name);
  return *t;
}

kernels::MatrixView TensorLoader::matrix(const std::string& name, int64_t rows, int64_t cols, bool repackable) {
  const auto& t = require(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)});
  const gguf::GgmlType packed = kernels::repacked_type(t.type, rows);
  if (repack_ == Repack::off || !repackable || packed == t.type) return mapped(t, rows, cols);
  if (auto it = repacked_.find(name); it != repacked_.end()) return it->second;
  kernels::MatrixView v = mapped(t, rows, cols);
  if (repack_ == Repack::copy) {
    // The file's rows are contiguous (row_stride is the row's bytes), as repack_rows wants.
    auto buf = std::make_unique_for_overwrite<uint8_t[]>(t.nbytes);
    f_.copy_out(t, buf.get());
    kernels::repack_rows(t.type, buf.get(), rows, cols);
    v.type = packed;
    v.data = buf.get();
    owned_.push_back(std::move(buf));
  }
  repacked_bytes_ += t.nbytes;
  repacked_.emplace(name, v);
  return v;
}

kernels::MatrixView TensorLoader::mapped(const gguf::TensorInfo& t, int64_t rows, int64_t cols) const {
  return {t.type, f_.tensor_data(t), rows, cols, static_cast<size_t>(t.nbytes / static_cast<uint64_t>(rows))};
}

ExpertsView TensorLoader::experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols) {
  const auto& t =
      require(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(n_expert)});
  ExpertsView v;
  v.type = t.type;
  v.data = f_.tensor_data(t);
  v.n_expert = n_expert;
  v.rows = rows;
  v.cols = cols;
  v.expert_stride = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(n_expert));
  v.row_stride = v.expert_stride / static_cast<size_t>(rows);
  v.file = t.file;
  v.file_offset = t.offset;
  return v;
}

std::vector<float> TensorLoader::vector(const std::string& name, int64_t n) {
  const auto& t = require(name, {static_cast<uint64_t>(n)});
  std::vector<float> out(static_cast<size_t>(n));
  kernels::dequantize_row(t.type, f_.tensor_data(t), out.data(), n);
  return out;
}

std::vector<float> TensorLoader::values(const std::string& name, std::vector<uint64_t> dims) {
  const auto trimmed = [](const std::vector<uint64_t>& d) {
    std::vector<uint64_t> out;
    for (uint64_t v : d)
      if (v != 1) out.push_back(v);
    return out;
  };
  const gguf::TensorInfo* t = f_.find_tensor(name);
  // Ask require() for the file's own dims when they match up to dims of 1, so
  // its checks (and its message, naming the shape we want) stay in one place.
  const auto& info = require(name, t && trimmed(t->dims) == trimmed(dims) ? t->dims : dims);
  const int64_t n = static_cast<int64_t>(info.n_elements());
  std::vector<float> out(static_cast<size_t>(n));
  kernels::dequantize_row(info.type, f_.tensor_data(info), out.data(), n);
  return out;
}

std::vector<int32_t> TensorLoader::ids(const std::string& name, const std::vector<uint64_t>& dims) {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (t == nullptr || t->dims != dims || t->type != gguf::GgmlType::I32)
    throw Error(ErrorKind::bad_model,
                f_.path() + ": tensor '" + name + "' " + dims_string(dims) + " of type I32 " +
                    (t ? "has shape " + t->shape_string() + " and type " + std::string(gguf::type_name(t->type))
                       : std::string("is missing")) +
                    " (convert the model again)");
  used_.insert(name);
  std::vector<int32_t> out(static_cast<size_t>(t->n_elements()));
  std::memcpy(out.data(), f_.tensor_data(*t), out.size() * sizeof(int32_t));
  return out;
}

size_t TensorLoader::skip(const std::string& prefix) {
  skipped_prefixes_.push_back(prefix);
  size_t n = 0;
  for (const auto& t : f_.tensors()) n += t.name.compare(0, prefix.size(), prefix) == 0;
  return n;
}

std::vector<std::string> TensorLoader::unused() const {
  std::vector<std::string> out;
  for (const auto& t : f_.tensors()) {
    if (used_.count(t.name)) continue;
    const bool skipped = std::any_of(skipped_prefixes_.begin(), skipped_prefixes_.end(),
                                     [&](const std::string& p) { return t.name.compare(0, p.size(), p) == 0; });
    if (!skipped) out.push_back(t.name);
  }
  return out;
}

std::vector<gguf::TensorInfo> TensorLoader::used_tensors() const {
  std::vector<gguf::TensorInfo> out;
  for (const auto& t : f_.tensors())
    if (used_.count(t.name)) out.push_back(t);
  return out;
}

void TensorLoader::note_role(const std::string& name, TensorRole role, int64_t block) {
  roles_[name] = Use{role, block};
}

std::vector<gguf::TensorInfo> TensorLoader::used_where(bool routed) const {
  std::vector<gguf::TensorInfo> out;
  for (const auto& t : f_.tensors()) {
    if (!used_.count(t.name)) continue;
    const auto it = roles_.find(t.name);
    if ((it != roles_.end() && is_routed(it->second.role)) == routed) out.push_back(t);
  }
  return out;
}

std::vector<gguf::TensorInfo> TensorLoader::routed_tensors() const { return used_where(true); }
std::vector<gguf::TensorInfo> TensorLoader::resident_tensors() const { return used_where(false); }

std::vector<kernels::MatrixView> TensorLoader::routers(int64_t n_block) const {
  std::vector<kernels::MatrixView> out(static_cast<size_t>(std::max<int64_t>(n_block, 0)));
  for (const auto& [name, use] : roles_) {
    if (use.role != TensorRole::router || use.block < 0 || use.block >= n_block) continue;
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr || t->dims.size() != 2) continue;  // loaded as a matrix: present and 2-D
    const auto rows = static_cast<int64_t>(t->dims[1]), cols = static_cast<int64_t>(t->dims[0]);
    out[static_cast<size_t>(use.block)] = mapped(*t, rows, cols);
  }
  return out;
}

}  // namespace ns
