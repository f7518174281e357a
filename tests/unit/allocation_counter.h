// Counts global operator new calls, for tests that a hot loop does not allocate.
// allocation_counter.cpp replaces the global operator new/delete of the whole test
// binary it is linked into (which costs only a counter increment elsewhere), and
// checks once that the counter sees allocations, so a zero means something.
// tests/CMakeLists.txt lists the modules whose binaries link it.
#pragma once

namespace ns_test {

// Global operator new calls since the program started.
long allocations();

}  // namespace ns_test
