// A fixed arena of equal, 4096-aligned slots for direct reads.
//
// Contract:
// - The whole arena is mapped once in the constructor (anonymous memory, not
//   locked) and, by default, pre-faulted so its pages count in RSS from the
//   start, as the memory budget assumes, and no page fault happens in the token
//   loop. Nothing allocates after construction.
// - Slots are addressed by index (slot(i)); acquire()/release() hand out free
//   slots from a fixed stack for owners that want the pool to track them.
// - iovecs() groups consecutive slots into runs of at most 1 GiB (io_uring's
//   limit per registered buffer); buffer_index(i) is the run holding slot i.
// - Not thread-safe: one owner.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <vector>

namespace ns::stream {

struct BufferPoolOptions {
  bool prefault = true;     // touch every page now (RSS = size from the start)
  bool huge_pages = false;  // madvise(MADV_HUGEPAGE): fewer TLB misses, 2 MiB-aligned arena
};

class BufferPool {
 public:
  BufferPool(uint32_t n_slots, uint64_t slot_bytes, const BufferPoolOptions& opts = {});
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  uint32_t n_slots() const { return n_slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }  // requested size rounded up to 4096
  uint64_t bytes() const { return n_slots_ * slot_bytes_; }
  uint8_t* slot(uint32_t i) const { return base_ + i * slot_bytes_; }

  // A free slot's index, or -1 when all are taken.
  int32_t acquire();
  void release(uint32_t i);
  uint32_t n_free() const { return static_cast<uint32_t>(free_.size()); }

  std::span<const iovec> iovecs() const { return iovecs_; }
  int32_t buffer_index(uint32_t i) const { return static_cast<int32_t>(i / slots_per_iovec_); }

 private:
  uint32_t n_slots_;
  uint64_t slot_bytes_;
  uint8_t* map_ = nullptr;  // the mapping (base_ rounded up within it)
  uint64_t map_bytes_ = 0;
  uint8_t* base_ = nullptr;
  std::vector<uint32_t> free_;  // reserved for n_slots at construction
  std::vector<uint8_t> taken_;
  std::vector<iovec> iovecs_;
  uint32_t slots_per_iovec_ = 1;
};

}  // namespace ns::stream
