// Exponential backoff with jitter for retries: of a job after a transient
// failure or an expired lease, and of a database operation that found the
// database locked or the disk full.
#pragma once

#include <cstdint>

namespace ns::jobs {

struct Backoff {
  int64_t base_ms = 5000;    // the delay after the first failure
  int64_t max_ms = 600'000;  // the cap
};

// The delay after `failures` failures in a row (1, 2, 3, ...):
// min(max, base * 2^(failures - 1)) scaled by a factor in [0.5, 1] drawn from
// `unit_random` in [0, 1) ("equal jitter": never less than half the
// exponential step, so retries of jobs that failed together spread out
// without collapsing to zero).
int64_t backoff_delay_ms(const Backoff& backoff, int32_t failures, double unit_random);
// Same, with a random draw from a per-thread generator.
int64_t backoff_delay_ms(const Backoff& backoff, int32_t failures);

}  // namespace ns::jobs
