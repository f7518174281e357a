#include "daemon/lib/progress_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ns::daemon {

std::string progress_bar(int64_t done, int64_t total, int width) {
  width = std::max(width, 1);
  int filled = 0;
  if (total > 0) {
    const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    filled = static_cast<int>(std::floor(fraction * width));
  }
  return "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '-') +
         "]";
}

std::string format_duration(double seconds) {
  if (!(seconds > 0)) return "0s";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

std::optional<double> eta_seconds(int64_t done, int64_t total, double rate) {
  if (!(rate > 0) || !std::isfinite(rate)) return std::nullopt;
  return static_cast<double>(std::max<int64_t>(total - done, 0)) / rate;
}

std::string format_rate(double per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, per_second >= 1 || per_second <= 0 ? "%.2f" : "%.3f", per_second);
  return buf;
}

std::string ago(int64_t now_ms, int64_t then_ms) {
  const double s = static_cast<double>(now_ms - then_ms) / 1000.0;
  if (s < 1) return "just now";
  return format_duration(s) + " ago";
}

}  // namespace ns::daemon
