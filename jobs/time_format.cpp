#include "jobs/time_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace ns::jobs {

int64_t now_epoch_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string iso8601_utc(int64_t epoch_ms) {
  if (epoch_ms == 0) return {};
  // Floor division so instants before 1970 still format correctly.
  int64_t secs = epoch_ms / 1000;
  int64_t ms = epoch_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace ns::jobs
