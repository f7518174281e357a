#include "daemon/http/auth.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.h"

namespace ns::http {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string> load_api_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorKind::invalid_input, "http.keys_file " + path + " cannot be read: " + std::strerror(errno) +
                                              " (one API key a line; the daemon's user must be able to read it)");
  }
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    if (key.size() < 16) {
      throw Error(ErrorKind::invalid_input, "http.keys_file " + path + " line " + std::to_string(n) +
                                                ": a key shorter than 16 characters is too easy to guess (make one "
                                                "with `openssl rand -hex 24`)");
    }
    keys.emplace_back(key);
  }
  if (keys.empty()) {
    throw Error(ErrorKind::invalid_input, "http.keys_file " + path +
                                              " holds no key: add one a line (e.g. from "
                                              "`openssl rand -hex 24`)");
  }
  return keys;
}

bool equal_constant_time(std::string_view stored, std::string_view given) {
  // Lengths differ: still the whole loop, against zero bytes past given's end.
  volatile unsigned char diff = stored.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < stored.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (static_cast<unsigned char>(stored[i]) ^ g);
  }
  return diff == 0;
}

bool KeyCheck::accepts(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return false;
  const std::string_view given = trim(authorization.substr(kBearer.size()));
  bool ok = false;
  for (const std::string& key : keys_) ok = equal_constant_time(key, given) || ok;  // every key, no early exit
  return ok;
}

}  // namespace ns::http
