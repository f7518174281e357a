// Memory budgets in tests built with AddressSanitizer (tests/sanitize/): the
// memory plan counts the process's RSS as its overhead, and ASan adds to it.
// - kAsanRssMiB: what ASan adds to a fresh `nightshift run`'s RSS; a test that
//   runs the CLI under a budget adds it, so the expert cache keeps its size.
// - with_asan_rss(): a budget for Model::load in this process, plus this
//   process's RSS under ASan (its quarantined frees grow with every test run
//   before); the budget itself without ASan.
#pragma once

#include <cstdint>

#include "engine/model/weight_streaming.h"

namespace ns::test {

// Measured 138-139 MiB on the nine models check_streams_within_budget runs (2026-12-05): ASan's shadow memory and
// allocator; the rest of the plan's overhead is 31-64 MiB without it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kAsanRssMiB = 144;
#else
inline constexpr int kAsanRssMiB = 0;
#endif

inline uint64_t with_asan_rss(uint64_t budget) { return kAsanRssMiB > 0 ? budget + current_rss_bytes() : budget; }

}  // namespace ns::test
