// Who may use the HTTP API: the bearer keys of http.keys_file, and the
// comparison of a request's Authorization header against them.
//
// Contract: load_api_keys() reads one key a line (blank lines and lines
// starting with # are skipped, spaces around a key trimmed) and throws
// ns::Error(invalid_input) naming the file, never a key, when the file cannot
// be read, holds no key, or a key is shorter than 16 characters. accepts()
// compares in time that depends only on the stored keys' lengths and count,
// not on how much of a key a caller guessed right. Thread-safe after
// construction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ns::http {

std::vector<std::string> load_api_keys(const std::string& path);

// Equal in time independent of where `given` first differs from `stored`
// (the loop runs over `stored`'s length whatever `given` is).
bool equal_constant_time(std::string_view stored, std::string_view given);

class KeyCheck {
 public:
  KeyCheck() = default;  // no keys: every request passes (the service is on loopback only)
  explicit KeyCheck(std::vector<std::string> keys) : keys_(std::move(keys)) {}

  bool required() const { return !keys_.empty(); }
  // `authorization`: the header's value ("Bearer KEY"); "" when absent.
  bool accepts(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace ns::http
