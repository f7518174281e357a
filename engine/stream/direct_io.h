// O_DIRECT alignment arithmetic. Direct reads need the file offset, the length
// and the destination address aligned to the device's logical block; we use
// 4096, which covers every disk we meet (512e and 4Kn alike). GGUF tensors are
// only 32-byte aligned, so a read of [offset, offset + length) fetches the
// aligned superset and hands out a pointer into it.
#pragma once

#include <cstdint>

namespace ns::stream {

inline constexpr uint64_t kDirectIoAlign = 4096;

constexpr uint64_t align_down(uint64_t v, uint64_t a = kDirectIoAlign) { return v & ~(a - 1); }
constexpr uint64_t align_up(uint64_t v, uint64_t a = kDirectIoAlign) { return (v + a - 1) & ~(a - 1); }
constexpr bool is_aligned(uint64_t v, uint64_t a = kDirectIoAlign) { return (v & (a - 1)) == 0; }

// Bytes of the aligned superset of [offset, offset + length).
constexpr uint64_t direct_read_span(uint64_t offset, uint64_t length) {
  return align_up(offset + length) - align_down(offset);
}

// Buffer bytes that hold the aligned superset of `length` bytes at any offset.
constexpr uint64_t direct_read_capacity(uint64_t length) { return align_up(length) + kDirectIoAlign; }

}  // namespace ns::stream
