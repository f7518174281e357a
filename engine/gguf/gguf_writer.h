// GGUF v3 writer that streams: declare metadata and tensors, open() writes the
// header, then each tensor's bytes are written in declaration order.
//
// Contract:
// - Metadata keys keep their insertion order; setting a key again replaces its
//   value in place. Values use the reader's Value type (gguf_file.h), so any
//   value the reader returns (nested arrays included) can be written back.
//   set() checks the value (integers in range, array elements of the declared
//   type) and throws ns::Error(invalid_input) naming the key.
// - "general.alignment" (UINT32, a power of two up to 65536) sets the data alignment; it is
//   written only if set, and readers then assume the default of 32.
// - Tensors: a unique name of 1..63 bytes, 1..4 dims in ggml order (dims[0] is
//   the contiguous row and a multiple of the type's block size), a known type.
//   Data offsets are multiples of the alignment; every tensor is followed by
//   zero padding up to the next multiple (the last one too, as llama.cpp does).
// - The layout (offsets, file_size()) is known before anything is written, so
//   callers can size a file without writing it. Declaring after open() throws.
// - write_data() takes the current tensor's bytes in chunks of any size and
//   moves to the next tensor when one is complete; more bytes than the tensor
//   holds throw invalid_input, and close() throws if a tensor is incomplete.
// - Memory: one fixed write buffer; nothing proportional to the tensor data, so
//   files larger than RAM can be written.
// - I/O failures (open, short write, ENOSPC, sync, close) throw ns::Error(io)
//   naming the path, the errno text and the file offset. An output that was not
//   closed successfully is removed (if it is a regular file), so no truncated
//   GGUF is left behind.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"

namespace ns::gguf {

// Builders for metadata values: w.set("llama.block_count", val::u32(3)).
namespace val {
Value u8(uint8_t v);
Value i8(int8_t v);
Value u16(uint16_t v);
Value i16(int16_t v);
Value u32(uint32_t v);
Value i32(int32_t v);
Value u64(uint64_t v);
Value i64(int64_t v);
Value f32(float v);
Value f64(double v);
Value boolean(bool v);
Value str(std::string v);
// An array whose elements all have type `elem` (elem may be ARRAY: nested arrays).
Value array(ValueType elem, std::vector<Value> elems);
Value string_array(const std::vector<std::string>& v);
Value f32_array(const std::vector<float>& v);
Value i32_array(const std::vector<int32_t>& v);
}  // namespace val

class GgufWriter {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;
  static constexpr uint32_t kVersion = 3;
  static constexpr size_t kMaxNameBytes = 63;  // ggml's GGML_MAX_NAME (64) minus the NUL
  static constexpr size_t kMaxDims = 4;

  explicit GgufWriter(size_t buffer_bytes = 4u << 20);
  ~GgufWriter();  // removes an output file that was opened but not closed
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // ---- metadata (before open()) ----
  void set(const std::string& key, Value value);
  const Value* find(const std::string& key) const;
  size_t n_metadata() const { return kv_.size(); }
  uint32_t alignment() const { return alignment_; }

  // ---- tensors (before open()) ----
  // Returns the tensor's index (declaration order = data order).
  size_t add_tensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type);
  size_t n_tensors() const { return tensors_.size(); }
  // The tensor as a reader will see it: offset is absolute (data_offset() + relative).
  TensorInfo tensor(size_t index) const;

  // ---- layout (any time) ----
  uint64_t header_bytes() const;  // magic .. last tensor info, before the padding
  uint64_t data_offset() const;   // header_bytes() rounded up to the alignment
  uint64_t data_bytes() const;    // tensor data including padding
  uint64_t file_size() const { return data_offset() + data_bytes(); }
  // The header section exactly as open() writes it (header_bytes() long).
  std::vector<uint8_t> serialize_header() const;

  // ---- writing ----
  // Creates/truncates `path` and writes the header section and its padding.
  void open(const std::string& path);
  // Next bytes of the current tensor (any chunking).
  void write_data(std::span<const uint8_t> bytes);
  // All bytes of tensor `name`, which must be the current tensor, none written yet.
  void write_tensor(const std::string& name, std::span<const uint8_t> bytes);
  // Index of the tensor write_data() fills next; nullopt once all are written.
  std::optional<size_t> current_tensor() const;
  uint64_t bytes_written() const { return file_pos_; }
  // Checks every tensor is complete, flushes, syncs (regular files) and closes.
  void close();
  // Instead of close() right after open(): ends the file at its full size with
  // no tensor data written, so the data section reads as zeros and takes no
  // disk space (a sparse file). For planning with a real model's header
  // (`nightshift model info` on a 1T-parameter shape) without its weights.
  void close_without_data();

 private:
  struct Entry {
    std::string key;
    Value value;
  };
  struct Declared {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    uint64_t nbytes;
    uint64_t rel_offset;  // from the start of the data section
  };

  void require_not_open(const char* what) const;
  void require_open(const char* what) const;
  void finish_current_tensor_if_full();
  void put(const uint8_t* p, size_t n);  // buffered append to the file
  void put_zeros(uint64_t n);
  void flush_buffer();
  void write_fully(const uint8_t* p, size_t n);
  [[noreturn]] void fail_io(const std::string& doing, int err);
  void abandon() noexcept;  // close and remove a failed output

  std::vector<Entry> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<Declared> tensors_;
  std::map<std::string, size_t> tensor_index_;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_end_ = 0;  // padded size of the data section so far
  mutable std::optional<uint64_t> header_bytes_cache_;

  // Output state.
  std::string path_;
  int fd_ = -1;
  bool regular_file_ = false;
  std::vector<uint8_t> buf_;
  size_t buf_capacity_;
  uint64_t file_pos_ = 0;     // bytes handed to put() so far (buffered or written)
  size_t cur_ = 0;            // current tensor index
  uint64_t cur_written_ = 0;  // bytes of the current tensor received
};

}  // namespace ns::gguf
