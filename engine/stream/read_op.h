// One read request and its completion object: (file, offset, length, buffer).
//
// Contract:
// - The caller owns the op and its buffer; both must stay put (no move, no
//   reuse) from submit until the op has finished (done or failed).
// - The buffer must be 4096-aligned and hold direct_read_span(offset, length)
//   bytes: the reader fetches the 4096-aligned superset of the range and
//   data() points at `offset` inside it.
// - Completion is published with release/acquire: once finished() is true
//   (on any thread) the bytes and the error fields are visible.
// - The reader's I/O side owns the progress fields while the op is queued.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/stream/direct_io.h"

namespace ns::stream {

class ReadOp {
 public:
  enum class State : uint32_t { idle, queued, done, failed };

  ReadOp() = default;
  ReadOp(const ReadOp&) = delete;
  ReadOp& operator=(const ReadOp&) = delete;

  // Describes the next read; the op must not be queued. `buffer_index` names a
  // registered buffer (Reader::register_buffers) that contains the buffer, or -1.
  void prepare(uint32_t file, uint64_t offset, uint64_t length, uint8_t* buffer, uint64_t capacity,
               int32_t buffer_index = -1) {
    file_ = file;
    offset_ = offset;
    length_ = length;
    buffer_ = buffer;
    capacity_ = capacity;
    buffer_index_ = buffer_index;
    start_ = align_down(offset);
    need_ = offset + length - start_;
    span_ = direct_read_span(offset, length);
  }

  State state() const { return state_.load(std::memory_order_acquire); }
  bool finished() const {
    const State s = state();
    return s == State::done || s == State::failed;
  }
  bool ok() const { return state() == State::done; }

  uint32_t file() const { return file_; }
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }
  // The requested bytes (valid once ok()).
  const uint8_t* data() const { return buffer_ + (offset_ - start_); }
  uint8_t* buffer() const { return buffer_; }

  // Why a failed op failed: an errno value, or 0 when the file ended before the
  // requested range did. error_offset() is the file offset that could not be read.
  int error_code() const { return err_; }
  uint64_t error_offset() const { return err_offset_; }

 private:
  friend class Reader;

  // Set by prepare().
  uint32_t file_ = 0;
  uint64_t offset_ = 0, length_ = 0;
  uint8_t* buffer_ = nullptr;
  uint64_t capacity_ = 0;
  int32_t buffer_index_ = -1;
  uint64_t start_ = 0;  // aligned file offset of buffer_[0]
  uint64_t need_ = 0;   // bytes from start_ that must arrive (the tail past EOF may not)
  uint64_t span_ = 0;   // bytes from start_ that are asked for (aligned)

  // Progress, owned by the reader's I/O side while queued.
  int32_t fixed_index_ = -1;  // registered buffer to read into, or -1
  uint64_t carved_ = 0;       // bytes of span_ handed out as chunks
  uint32_t in_flight_ = 0;    // chunks being read
  bool failed_ = false;
  int err_ = 0;
  uint64_t err_offset_ = 0;
  ReadOp* next_ = nullptr;  // intrusive pending-queue link: queuing never allocates

  std::atomic<State> state_{State::idle};
};

}  // namespace ns::stream
