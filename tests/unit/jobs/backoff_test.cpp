// Retry delays: exponential in the number of failures, capped, with jitter
// that never drops below half the step.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>

#include "jobs/backoff.h"

using ns::jobs::Backoff;
using ns::jobs::backoff_delay_ms;

TEST_CASE("the delay doubles per failure up to the cap; jitter keeps it in [step/2, step]") {
  const Backoff b{1000, 30'000};
  CHECK(backoff_delay_ms(b, 1, 0.999999) == 1000);
  CHECK(backoff_delay_ms(b, 1, 0.0) == 500);
  CHECK(backoff_delay_ms(b, 2, 0.999999) == 2000);
  CHECK(backoff_delay_ms(b, 3, 0.0) == 2000);
  CHECK(backoff_delay_ms(b, 5, 0.999999) == 16'000);
  CHECK(backoff_delay_ms(b, 6, 0.999999) == 30'000);  // 32 s capped
  CHECK(backoff_delay_ms(b, 6, 0.0) == 15'000);
  CHECK(backoff_delay_ms(b, 1'000'000, 0.5) == 22'500);  // no overflow however many failures
  CHECK(backoff_delay_ms(b, 0, 0.999999) == 1000);       // "no failure yet" reads as the first
  CHECK(backoff_delay_ms(Backoff{0, 0}, 7, 0.7) == 0);   // tests: retry at once
}

TEST_CASE("the random draw spreads the retries of jobs that failed together") {
  const Backoff b{10'000, 600'000};
  std::set<int64_t> delays;
  for (int i = 0; i < 50; ++i) {
    const int64_t d = backoff_delay_ms(b, 3);
    CHECK(d >= 20'000);
    CHECK(d <= 40'000);
    delays.insert(d);
  }
  CHECK(delays.size() > 40);
}
