// Wall-clock time as the queue stores it: epoch milliseconds, and the same
// instant as ISO-8601 UTC text ("2025-01-31T22:05:09.123Z") for humans.
#pragma once

#include <cstdint>
#include <string>

namespace ns::jobs {

int64_t now_epoch_ms();
// "" for 0 (meaning "not yet").
std::string iso8601_utc(int64_t epoch_ms);

}  // namespace ns::jobs
