// What the chat tests that read real templates share: a file's bytes, and the
// moment shared/chat-templates' expected renders were made at (strftime_now).
#pragma once

#include <doctest/doctest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ns::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 2026-07-04 09:30:00 UTC.
inline std::time_t rendered_at() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 4;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  return timegm(&tm);
}

}  // namespace ns::test
