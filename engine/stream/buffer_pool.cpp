#include "engine/stream/buffer_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "engine/stream/direct_io.h"
#include "common/error.h"

namespace ns::stream {
namespace {

constexpr uint64_t kHugePage = 2ull << 20;
constexpr uint64_t kMaxRegistered = 1ull << 30;

}  // namespace

BufferPool::BufferPool(uint32_t n_slots, uint64_t slot_bytes, const BufferPoolOptions& opts)
    : n_slots_(n_slots), slot_bytes_(align_up(std::max<uint64_t>(slot_bytes, 1))) {
  if (n_slots == 0) throw Error(ErrorKind::internal, "BufferPool needs at least one slot");
  const uint64_t bytes = n_slots_ * slot_bytes_;
  const uint64_t align = opts.huge_pages ? kHugePage : kDirectIoAlign;
  map_bytes_ = bytes + (align > kDirectIoAlign ? align : 0);
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(ErrorKind::io, "cannot map a " + std::to_string(bytes) + "-byte read buffer pool: " +
                                   std::strerror(errno) + "; lower memory_budget or free memory");
  map_ = static_cast<uint8_t*>(p);
  base_ = reinterpret_cast<uint8_t*>(align_up(reinterpret_cast<uintptr_t>(map_), align));
  if (opts.huge_pages) ::madvise(base_, bytes, MADV_HUGEPAGE);  // advisory: ignore where THP is off
  if (opts.prefault) {
#ifdef MADV_POPULATE_WRITE
    const bool populated = ::madvise(base_, bytes, MADV_POPULATE_WRITE) == 0;
#else
    const bool populated = false;
#endif
    if (!populated)
      for (uint64_t off = 0; off < bytes; off += kDirectIoAlign) base_[off] = 0;
  }

  free_.reserve(n_slots_);
  for (uint32_t i = n_slots_; i-- > 0;) free_.push_back(i);  // slot 0 comes out first
  taken_.assign(n_slots_, 0);

  slots_per_iovec_ = static_cast<uint32_t>(std::max<uint64_t>(1, kMaxRegistered / slot_bytes_));
  for (uint32_t first = 0; first < n_slots_; first += slots_per_iovec_) {
    const uint32_t n = std::min(slots_per_iovec_, n_slots_ - first);
    iovecs_.push_back(iovec{slot(first), n * slot_bytes_});
  }
}

BufferPool::~BufferPool() { ::munmap(map_, map_bytes_); }

int32_t BufferPool::acquire() {
  if (free_.empty()) return -1;
  const uint32_t i = free_.back();
  free_.pop_back();
  taken_[i] = 1;
  return static_cast<int32_t>(i);
}

void BufferPool::release(uint32_t i) {
  if (i >= n_slots_ || !taken_[i])
    throw Error(ErrorKind::internal, "BufferPool::release of slot " + std::to_string(i) + " that is not taken");
  taken_[i] = 0;
  free_.push_back(i);
}

}  // namespace ns::stream
