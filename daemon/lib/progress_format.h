// Small text pieces for progress displays (`status`, `watch`, `run`, the status page): a bar,
// a duration, a rate, an ETA. Pure functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ns::daemon {

// "[#####-----]" with `width` cells between the brackets; done is clamped to [0, total].
std::string progress_bar(int64_t done, int64_t total, int width);

// Compact, two units at most: "0s", "45s", "3m05s", "1h02m", "2d03h".
std::string format_duration(double seconds);

// Seconds until `total` at `rate` per second; nullopt when the rate is unknown (<= 0).
std::optional<double> eta_seconds(int64_t done, int64_t total, double rate);

// "3.14" for rates >= 1, "0.314" below (so slow models do not print 0.00).
std::string format_rate(double per_second);

// How long ago `then_ms` was, relative to `now_ms`: "5s ago", "3m05s ago", "just now".
std::string ago(int64_t now_ms, int64_t then_ms);

}  // namespace ns::daemon
