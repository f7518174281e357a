#include "jobs/backoff.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ns::jobs {

int64_t backoff_delay_ms(const Backoff& backoff, int32_t failures, double unit_random) {
  const int64_t base = std::max<int64_t>(backoff.base_ms, 0);
  const int64_t cap = std::max(backoff.max_ms, base);
  // Double until the cap; stop early so the shift never overflows.
  int64_t step = base;
  for (int32_t i = 1; i < failures && step < cap; ++i) step *= 2;
  step = std::min(step, cap);
  const double u = std::clamp(unit_random, 0.0, 1.0);
  return static_cast<int64_t>(std::llround(static_cast<double>(step) * (0.5 + 0.5 * u)));
}

int64_t backoff_delay_ms(const Backoff& backoff, int32_t failures) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return backoff_delay_ms(backoff, failures, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
}

}  // namespace ns::jobs
