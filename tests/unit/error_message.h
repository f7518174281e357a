// What an ns::Error thrown in a test says, for the tests that bad input is
// refused with a clear message (each module's tests include it):
// - error_message(): the message of the ns::Error a call throws, its kind
//   checked; "" when the call returns (for helpers that tell accepted input
//   from refused input).
// - expect_error(): the same, but a call that returns fails the test with
//   `if_accepted`.
// - contains(): whether a message holds a part.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace ns::test {

// The message of the ns::Error `f` throws, after checking its kind; nullopt when `f` returns.
template <class F>
std::optional<std::string> thrown_message(ns::ErrorKind kind, F&& f) {
  try {
    f();
  } catch (const ns::Error& e) {
    CHECK(error_kind_name(e.kind()) == std::string(error_kind_name(kind)));
    return std::string(e.what());
  }
  return std::nullopt;
}

template <class F>
std::string error_message(ns::ErrorKind kind, F&& f) {
  return thrown_message(kind, std::forward<F>(f)).value_or("");
}

template <class F>
std::string expect_error(ns::ErrorKind kind, F&& f, const char* if_accepted) {
  const std::optional<std::string> msg = thrown_message(kind, std::forward<F>(f));
  if (!msg) FAIL(if_accepted);
  return msg.value_or("");
}

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace ns::test
