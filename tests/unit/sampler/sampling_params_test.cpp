// SamplingParams::validate(): each field's bounds, and messages that name the field, the value and the range.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/sampling_params.h"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
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
    const std::string m = message_after([&](auto& p) { p.max_tokens = bad; });
    CHECK(contains(m, "max_tokens"));
    CHECK(contains(m, std::to_string(bad)));
    CHECK(contains(m, "1..1000000"));
  }
}

TEST_CASE("temperature must be finite and in [0, 10]") {
  struct Case { float value; const char* shown; };
  for (const Case c : {Case{-0.1f, "-0.1"}, Case{10.5f, "10.5"}, Case{kNaN, "nan"}, Case{kInf, "inf"},
                       Case{-kInf, "-inf"}}) {
    const std::string m = message_after([&](auto& p) { p.temperature = c.value; });
    CHECK(contains(m, "temperature"));
    CHECK(contains(m, c.shown));
    CHECK(contains(m, "[0, 10]"));
    CHECK(contains(m, "finite"));
  }
}

TEST_CASE("top_k must not be negative") {
  const std::string m = message_after([](auto& p) { p.top_k = -1; });
  CHECK(contains(m, "top_k"));
  CHECK(contains(m, "-1"));
  CHECK(contains(m, ">= 0"));
}

TEST_CASE("top_p must be in (0, 1]") {
  for (float bad : {0.0f, -0.5f, 1.01f, kNaN, kInf}) {
    const std::string m = message_after([&](auto& p) { p.top_p = bad; });
    CHECK(contains(m, "top_p"));
    CHECK(contains(m, "(0, 1]"));
  }
  CHECK(contains(message_after([](auto& p) { p.top_p = 1.5f; }), "1.5"));
}

TEST_CASE("min_p must be in [0, 1)") {
  for (float bad : {1.0f, -0.01f, kNaN}) {
    const std::string m = message_after([&](auto& p) { p.min_p = bad; });
    CHECK(contains(m, "min_p"));
    CHECK(contains(m, "[0, 1)"));
  }
  CHECK(contains(message_after([](auto& p) { p.min_p = 1.0f; }), "= 1 "));
}

TEST_CASE("repeat_penalty must be in (0, 10]") {
  for (float bad : {0.0f, -1.0f, 10.5f, kNaN, kInf}) {
    const std::string m = message_after([&](auto& p) { p.repeat_penalty = bad; });
    CHECK(contains(m, "repeat_penalty"));
    CHECK(contains(m, "(0, 10]"));
  }
}

TEST_CASE("repeat_last_n must not be negative") {
  const std::string m = message_after([](auto& p) { p.repeat_last_n = -3; });
  CHECK(contains(m, "repeat_last_n"));
  CHECK(contains(m, "-3"));
}

TEST_CASE("stop: at most 16 strings of 1..256 bytes") {
  const std::string too_many = message_after([](auto& p) { p.stop.assign(17, "x"); });
  CHECK(contains(too_many, "stop"));
  CHECK(contains(too_many, "17"));
  CHECK(contains(too_many, "16"));

  const std::string empty = message_after([](auto& p) { p.stop = {"ok", ""}; });
  CHECK(contains(empty, "stop[1]"));
  CHECK(contains(empty, "0 bytes"));
  CHECK(contains(empty, "1..256"));

  const std::string too_long = message_after([](auto& p) { p.stop = {std::string(257, 'y')}; });
  CHECK(contains(too_long, "stop[0]"));
  CHECK(contains(too_long, "257"));
}
