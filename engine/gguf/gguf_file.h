// GGUF reader (versions 2 and 3): metadata, tensor index, data section.
//
// Contract: parse() checks every length, count, offset and size against the
// bytes it was given before using it, and throws ns::Error(bad_model) naming
// the key or tensor and the byte offset where the file went wrong. Nothing is
// read out of bounds, whatever the input (it is fuzzed: tests/fuzz/).
//
// GgufFile::open() maps the file read-only; tensor data pointers stay valid
// for the GgufFile's lifetime. Not thread-safe to construct; const methods are.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/ggml_type.h"

namespace ns::gguf {

// Metadata value types, ids fixed by the GGUF format.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Scalars keep their exact type; integers are also
// readable as int64/uint64 and floats as double through the accessors.
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;                          // unsigned integers and bool
  int64_t i = 0;                           // signed integers
  double f = 0;                            // FLOAT32 / FLOAT64
  std::string s;                           // STRING
  ValueType elem_type = ValueType::UINT8;  // ARRAY: element type
  std::vector<Value> arr;                  // ARRAY: elements (arrays may nest)

  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  GgmlType type;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t nbytes = 0;
  uint32_t file = 0;  // which file of the model holds it: its shard in a GgufSet (gguf_set.h); 0 here
  uint64_t n_elements() const;
  uint64_t rows() const { return dims.empty() ? 0 : n_elements() / dims[0]; }
  std::string shape_string() const;  // e.g. "[128, 32000]"
};

class GgufFile {
 public:
  // Parses an in-memory image of a whole GGUF file. `bytes` must outlive the result
  // only if tensor_data() is used; metadata is copied.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string source_name = "<memory>");
  // Maps `path` read-only and parses it. Throws ns::Error (io for open/map
  // failures, bad_model for format errors), the path in the message.
  static std::shared_ptr<GgufFile> open(const std::string& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }
  // st_dev of the file open() mapped (symlinks resolved: the device that
  // serves its reads); 0 for parse()d bytes.
  uint64_t device() const { return device_; }

  const std::map<std::string, Value>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters: throw ns::Error(bad_model) naming the key if it is missing
  // or of an incompatible type. The *_or variants return `def` when missing.
  std::string get_string(const std::string& key) const;
  std::string get_string_or(const std::string& key, const std::string& def) const;
  uint64_t get_u64(const std::string& key) const;  // any non-negative integer type
  uint64_t get_u64_or(const std::string& key, uint64_t def) const;
  int64_t get_i64_or(const std::string& key, int64_t def) const;
  double get_f64(const std::string& key) const;  // any float or integer type
  double get_f64_or(const std::string& key, double def) const;
  bool get_bool_or(const std::string& key, bool def) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;    // numeric arrays
  std::vector<int32_t> get_i32_array(const std::string& key) const;  // integer arrays

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  // Pointer to a tensor's bytes inside the mapping (or the parsed span).
  const uint8_t* tensor_data(const TensorInfo& t) const { return base_ + t.offset; }
  // Streaming: page faults on the mapping read only the page touched (no
  // read-ahead into neighbouring expert stacks, which must not enter RSS).
  // No-op for parsed spans. Returns false (errno set) if madvise refused.
  bool advise_random() const;
  // Copies t's bytes out of the mapping into dst (t.nbytes), then drops the
  // mapping's pages that lie wholly inside t from this process (MADV_DONTNEED:
  // they leave its RSS; the page cache keeps or reclaims them as it likes):
  // for a tensor the caller keeps its own copy of and never reads through the
  // mapping again. Read-ahead is asked for first (MADV_WILLNEED), so a cold
  // copy reads in large requests even under advise_random(). A parsed span is
  // only copied.
  void copy_out(const TensorInfo& t, void* dst) const;

 private:
  GgufFile() = default;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  uint64_t device_ = 0;
  std::string path_;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  const uint8_t* base_ = nullptr;
  void* map_ = nullptr;  // owned mapping (open()), unmapped in the destructor
  size_t map_len_ = 0;
  friend class Parser;
};

}  // namespace ns::gguf
