// Figures about this process from /proc, for stats: bytes it made the kernel
// read from storage, and its resident set. 0 where unknown.
#pragma once

#include <cstdint>

namespace ns {

// /proc/self/io read_bytes: what this process's reads and page faults fetched
// from storage (in io_mode mmap, the expert bytes the page faults read).
uint64_t process_read_bytes();

// Peak resident set size of this process (VmHWM), bytes.
uint64_t peak_rss_bytes();

}  // namespace ns
