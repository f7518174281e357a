#include "common/human_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace ns {
namespace {

[[noreturn]] void bad_size(std::string_view text, const char* why) {
  throw Error(ErrorKind::invalid_input, "size '" + std::string(text) + "' " + why +
                                            ": write a number of bytes with an optional unit, e.g. 8GiB, 2500MiB, 3G, "
                                            "1.5GiB (K/M/G/T and KiB..TiB are powers of 1024, KB..TB powers of 1000)");
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

uint64_t parse_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  // Integer and fraction digits, kept exact as integers (no floating-point rounding for whole sizes).
  uint64_t whole = 0;
  bool any_digit = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (whole > (UINT64_MAX - d) / 10) bad_size(text, "is too large");
    whole = whole * 10 + d;
    any_digit = true;
  }
  uint64_t frac = 0, frac_scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (frac_scale <= UINT64_MAX / 100) {  // digits past 18 decimals cannot change a byte count
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_scale *= 10;
      }
      any_digit = true;
    }
  }
  if (!any_digit) bad_size(text, text.find('-') != std::string_view::npos ? "is negative" : "has no number");
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string_view unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.remove_suffix(1);

  struct Unit {
    std::string_view name;
    uint64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1ull << 10},
      {"kib", 1ull << 10},
      {"kb", 1000ull},
      {"m", 1ull << 20},
      {"mib", 1ull << 20},
      {"mb", 1000ull * 1000},
      {"g", 1ull << 30},
      {"gib", 1ull << 30},
      {"gb", 1000ull * 1000 * 1000},
      {"t", 1ull << 40},
      {"tib", 1ull << 40},
      {"tb", 1000ull * 1000 * 1000 * 1000},
  };
  for (const Unit& u : kUnits) {
    if (!iequals(unit, u.name)) continue;
    if (whole > UINT64_MAX / u.factor) bad_size(text, "is too large");
    const uint64_t base = whole * u.factor;
    // frac / frac_scale of a unit, rounded down; long double keeps 64 bits of mantissa.
    const auto extra = static_cast<uint64_t>(std::floor(
        static_cast<long double>(frac) * static_cast<long double>(u.factor) / static_cast<long double>(frac_scale)));
    if (base > UINT64_MAX - extra) bad_size(text, "is too large");
    return base + extra;
  }
  bad_size(text, "has an unknown unit");
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  int u = 0;
  long double v = static_cast<long double>(bytes);
  while (v >= 1024.0L && u < 6) {
    v /= 1024.0L;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2Lf %s", v, kNames[u]);
  return buf;
}

}  // namespace ns
