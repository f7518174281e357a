// A model's GGUF files as one: a split set (the shards llama.cpp's gguf-split
// writes, NAME-00001-of-00013.gguf ...) or a single unsplit file (a set of one).
//
// Split sets: every shard is a complete GGUF with the keys split.no (0-based),
// split.count and split.tensors.count (the tensors of all shards together).
// The first shard holds all the model's metadata (it may hold no tensors:
// gguf-split --no-tensor-first-split); later shards hold the split.* keys and
// their tensors.
//
// Contract:
// - open(path) takes any shard's path (or an unsplit file's) and finds the
//   others by the naming beside it. It checks the set: every shard present,
//   each with the split.count of the set and the split.no of its name, the
//   tensor counts adding up to split.tensors.count, no tensor name in two
//   shards. It throws ns::Error(bad_model) naming the missing or mismatched
//   shard and the fix, and GgufFile::open's errors for a shard it cannot map
//   or parse (a missing first path: invalid_input, as GgufFile::open).
//   split.count 0 (a file gguf-split --merge wrote) or 1 is a single file.
// - metadata() is the first shard's GgufFile: every metadata key of the model.
// - tensors() lists the tensors of every shard, shard by shard, in file order;
//   each TensorInfo's `file` is its shard's index (paths()[file]) and its
//   `offset` is absolute in that shard. tensor_data() points into that
//   shard's mapping, valid for the set's lifetime.
// - Const methods are thread-safe; construction is not.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"

namespace ns::gguf {

// The metadata keys of a split set.
inline constexpr const char* kSplitNo = "split.no";
inline constexpr const char* kSplitCount = "split.count";
inline constexpr const char* kSplitTensorsCount = "split.tensors.count";

// A shard's path split at gguf-split's naming: PREFIX-NNNNN-of-MMMMM.gguf,
// NNNNN 1-based.
struct SplitName {
  std::string prefix;  // the path before "-NNNNN-of-MMMMM.gguf"
  uint32_t no = 0;     // 0-based (NNNNN - 1)
  uint32_t count = 0;  // MMMMM
};
// nullopt when `path` does not follow the naming (or its numbers are 0 or NNNNN > MMMMM).
std::optional<SplitName> parse_split_name(const std::string& path);
// The path of shard `no` (0-based) of `count`: PREFIX-NNNNN-of-MMMMM.gguf.
std::string split_shard_path(const std::string& prefix, uint32_t no, uint32_t count);

class GgufSet {
 public:
  // Opens the set `path` belongs to (see above).
  static std::shared_ptr<GgufSet> open(const std::string& path);
  // The set of already opened shards, in order (shard 0 first), checked as
  // open() checks them. A single file without split.* keys is a set of one.
  static std::shared_ptr<GgufSet> of(std::vector<std::shared_ptr<GgufFile>> shards);

  size_t n_shards() const { return shards_.size(); }
  bool split() const { return split_; }  // the files carry split.count >= 1 (a set of one may too)
  const GgufFile& shard(size_t i) const { return *shards_.at(i); }
  const GgufFile& metadata() const { return *shards_.front(); }
  const std::string& path() const { return shards_.front()->path(); }  // the first shard's
  std::vector<std::string> paths() const;
  uint64_t total_bytes() const;  // of every shard
  size_t n_devices() const;      // distinct GgufFile::device() of the shards

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  // t's bytes in its shard's mapping.
  const uint8_t* tensor_data(const TensorInfo& t) const { return shards_.at(t.file)->tensor_data(t); }
  // GgufFile::copy_out in t's shard.
  void copy_out(const TensorInfo& t, void* dst) const { shards_.at(t.file)->copy_out(t, dst); }
  // GgufFile::advise_random on every shard; false (errno set) if one refused.
  bool advise_random() const;

 private:
  GgufSet() = default;
  std::vector<std::shared_ptr<GgufFile>> shards_;
  bool split_ = false;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace ns::gguf
