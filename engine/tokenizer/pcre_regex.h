// A compiled PCRE2 pattern (UTF + UCP mode, JIT-compiled where the platform
// allows) that reports the spans of all its matches in a UTF-8 subject.
//
// Contract: compile() throws ns::Error(internal) with PCRE2's message and the
// offset if the pattern is malformed. Compiled patterns are cached process-wide
// by their text and are immutable, so one instance serves every thread.
// Subjects must be valid UTF-8 (the caller normalizes them; see pretokenizer.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ns::tok {

class Regex {
 public:
  static std::shared_ptr<const Regex> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) (byte offsets into subject) for each
  // successive non-overlapping, non-empty match, scanning left to right as
  // std::regex_iterator does. `$` matches only at the very end of subject.
  template <typename F>
  void for_each_match(std::string_view subject, F&& on_match) const {
    size_t at = 0;
    std::pair<size_t, size_t> m;
    while (at <= subject.size() && find(subject, at, m)) {
      if (m.second > m.first) {
        on_match(m.first, m.second);
        at = m.second;
      } else {
        at = m.first + 1;  // empty match: step past it (none of the shipped patterns allow one)
        while (at < subject.size() && (static_cast<unsigned char>(subject[at]) & 0xC0) == 0x80) ++at;
      }
    }
  }

  // True if the pattern matches at exactly `at` (anchored there).
  bool matches_at(std::string_view subject, size_t at) const;

  const std::string& pattern() const { return pattern_; }

 private:
  explicit Regex(std::string pattern);
  // First match starting at or after `start`; false if there is none.
  bool find(std::string_view subject, size_t start, std::pair<size_t, size_t>& match, bool anchored = false) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace ns::tok
