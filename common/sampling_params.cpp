// SamplingParams::validate(): the one place that knows the allowed ranges.
// Each message names the field, the value given and the range allowed, so a
// user reading a failed job row knows what to change.
#include <cmath>
#include <cstdio>
#include <string>

#include "common/sampling_params.h"

namespace ns {
namespace {

constexpr int32_t kMaxTokensLimit = 1'000'000;
constexpr float kMaxTemperature = 10.0f;
constexpr float kMaxRepeatPenalty = 10.0f;
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxGrammarBytes = 1 << 20;

std::string format_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

std::string bad(const char* field, const std::string& value, const char* allowed) {
  return std::string(field) + " = " + value + " is invalid: " + allowed;
}

}  // namespace

std::string SamplingParams::validate() const {
  if (max_tokens < 1 || max_tokens > kMaxTokensLimit)
    return bad("max_tokens", std::to_string(max_tokens), "must be in 1..1000000");
  // Comparisons written so that NaN fails them; infinities fall outside the bounds.
  if (!(std::isfinite(temperature) && temperature >= 0.0f && temperature <= kMaxTemperature))
    return bad("temperature", format_float(temperature), "must be a finite number in [0, 10] (0 means greedy)");
  if (top_k < 0) return bad("top_k", std::to_string(top_k), "must be >= 0 (0 disables)");
  if (!(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f))
    return bad("top_p", format_float(top_p), "must be a finite number in (0, 1] (1 disables)");
  if (!(std::isfinite(min_p) && min_p >= 0.0f && min_p < 1.0f))
    return bad("min_p", format_float(min_p), "must be a finite number in [0, 1) (0 disables)");
  if (!(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f && repeat_penalty <= kMaxRepeatPenalty))
    return bad("repeat_penalty", format_float(repeat_penalty), "must be a finite number in (0, 10] (1 disables)");
  if (repeat_last_n < 0) return bad("repeat_last_n", std::to_string(repeat_last_n), "must be >= 0 (0 disables)");
  if (stop.size() > kMaxStopStrings)
    return "stop has " + std::to_string(stop.size()) + " strings: at most 16 are allowed";
  for (size_t i = 0; i < stop.size(); ++i) {
    const size_t n = stop[i].size();
    if (n < 1 || n > kMaxStopBytes)
      return "stop[" + std::to_string(i) + "] is " + std::to_string(n) +
             " bytes long: each stop string must be 1..256 bytes";
  }
  if (grammar.size() > kMaxGrammarBytes)
    return "grammar is " + std::to_string(grammar.size()) + " bytes: at most 1 MiB is accepted";
  if (!grammar.empty() && ignore_eos)
    return "ignore_eos cannot be combined with a grammar (the grammar decides where the output ends)";
  if (n < 1 || n > kMaxChoices) return bad("n", std::to_string(n), "must be in 1..128 (choices per job)");
  if (top_logprobs < 0 || top_logprobs > 20)
    return bad("top_logprobs", std::to_string(top_logprobs), "must be in 0..20");
  if (top_logprobs > 0 && !logprobs)
    return "top_logprobs = " + std::to_string(top_logprobs) + " needs logprobs: true (or --logprobs)";
  return "";
}

}  // namespace ns
