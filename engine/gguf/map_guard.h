// A model file shrunk or rewritten in place while mapped (a copy over it, a
// truncation) makes the next read of a page past its new end raise SIGBUS,
// which kills the process with no word in the log (#30 F). The guard turns
// that into a finding: a SIGBUS inside a guarded mapping replaces the whole
// mapping with zero pages (so the faulting read, retried, reads zeros), marks
// it faulted, and writes one line naming the file to stderr; the owner asks
// faulted_files() after its work and discards that work. A SIGBUS anywhere
// else keeps its default action (the process dies as before).
//
// Contract: guard() and unguard() from any thread, not from a signal
// handler; at most kSlots mappings guarded at once (more are mapped
// unguarded: guard() returns false). The handler is installed by the first
// guard() and calls only async-signal-safe code (mmap, write).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ns::gguf {

inline constexpr int kMapGuardSlots = 64;

bool guard_mapping(const void* base, size_t len, const std::string& path);
void unguard_mapping(const void* base);
// The paths of guarded mappings that took a SIGBUS since they were guarded.
std::vector<std::string> faulted_files();

}  // namespace ns::gguf
