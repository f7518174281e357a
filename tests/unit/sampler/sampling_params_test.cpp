// SamplingParams::validate(): each field's bounds, and messages that name the field, the value and the range.
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "common/sampling_params.h"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// `message` names each of `parts` (the field, the value, the allowed range).
void check_names(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    CAPTURE(part);
    CHECK(contains(message, part));
  }
}

// The message for params differing from the defaults by one change.
template <typename Change>
std::string message_after(Change change) {
  ns::SamplingParams p;
  change(p);
  return p.validate();
}

}  // namespace

TEST_CASE("default and boundary sampling params are valid") {
  CHECK(ns::SamplingParams{}.validate() == "");
  CHECK(message_after([](auto& p) { p.max_tokens = 1; }) == "");
  CHECK(message_after([](auto& p) { p.max_tokens = 1'000'000; }) == "");
  CHECK(message_after([](auto& p) { p.temperature = 0.0f; }) == "");
  CHECK(message_after([](auto& p) { p.temperature = 10.0f; }) == "");
  CHECK(message_after([](auto& p) { p.top_k = 0; }) == "");
  CHECK(message_after([](auto& p) { p.top_p = 1.0f; }) == "");
  CHECK(message_after([](auto& p) { p.top_p = 1e-6f; }) == "");
  CHECK(message_after([](auto& p) { p.min_p = 0.0f; }) == "");
  CHECK(message_after([](auto& p) { p.min_p = 0.999f; }) == "");
  CHECK(message_after([](auto& p) { p.repeat_penalty = 10.0f; }) == "");
  CHECK(message_after([](auto& p) { p.repeat_penalty = 0.5f; }) == "");
  CHECK(message_after([](auto& p) { p.repeat_last_n = 0; }) == "");
  CHECK(message_after([](auto& p) { p.stop.assign(16, std::string(256, 'x')); }) == "");
  CHECK(message_after([](auto& p) { p.stop = {"a"}; }) == "");
}

TEST_CASE("max_tokens out of range is named with its value and range") {
  for (int32_t bad : {0, -5, 1'000'001}) {
    check_names(message_after([&](auto& p) { p.max_tokens = bad; }), {"max_tokens", std::to_string(bad), "1..1000000"});
  }
}

TEST_CASE("temperature must be finite and in [0, 10]") {
  struct Case {
    float value;
    const char* shown;
  };
  for (const Case c :
       {Case{-0.1f, "-0.1"}, Case{10.5f, "10.5"}, Case{kNaN, "nan"}, Case{kInf, "inf"}, Case{-kInf, "-inf"}}) {
    check_names(message_after([&](auto& p) { p.temperature = c.value; }),
                {"temperature", c.shown, "[0, 10]", "finite"});
  }
}

TEST_CASE("top_k must not be negative") {
  check_names(message_after([](auto& p) { p.top_k = -1; }), {"top_k", "-1", ">= 0"});
}

TEST_CASE("top_p must be in (0, 1]") {
  for (float bad : {0.0f, -0.5f, 1.01f, kNaN, kInf}) {
    check_names(message_after([&](auto& p) { p.top_p = bad; }), {"top_p", "(0, 1]"});
  }
  CHECK(contains(message_after([](auto& p) { p.top_p = 1.5f; }), "1.5"));
}

TEST_CASE("min_p must be in [0, 1)") {
  for (float bad : {1.0f, -0.01f, kNaN}) {
    check_names(message_after([&](auto& p) { p.min_p = bad; }), {"min_p", "[0, 1)"});
  }
  CHECK(contains(message_after([](auto& p) { p.min_p = 1.0f; }), "= 1 "));
}

TEST_CASE("repeat_penalty must be in (0, 10]") {
  for (float bad : {0.0f, -1.0f, 10.5f, kNaN, kInf}) {
    check_names(message_after([&](auto& p) { p.repeat_penalty = bad; }), {"repeat_penalty", "(0, 10]"});
  }
}

TEST_CASE("repeat_last_n must not be negative") {
  check_names(message_after([](auto& p) { p.repeat_last_n = -3; }), {"repeat_last_n", "-3"});
}

TEST_CASE("stop: at most 16 strings of 1..256 bytes") {
  check_names(message_after([](auto& p) { p.stop.assign(17, "x"); }), {"stop", "17", "16"});
  check_names(message_after([](auto& p) { p.stop = {"ok", ""}; }), {"stop[1]", "0 bytes", "1..256"});
  check_names(message_after([](auto& p) { p.stop = {std::string(257, 'y')}; }), {"stop[0]", "257"});
}
