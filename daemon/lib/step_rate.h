// How fast the daemon's batch goes, and so when each of its jobs ends: the
// tok/s and ETA `nightshift status` and `watch` show.
//
// Model: a step's wall time t = c + a * tokens + b * keys, least-squares fitted
// over the steps since the batch last changed (or the recent window while that
// is too short); a key costs at least what the batch's latest second says it
// costs now. A job's ETA sums the predicted times of its remaining steps, every
// context growing and the batch shrinking as shorter jobs end, unless queued
// jobs refill their places (`refills`). ETAs are to max_tokens. Not
// thread-safe (the worker thread owns it). Why this model, and its measured
// errors on recorded runs: docs/watching-progress.md, "How the ETA was fitted".
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "engine/api/batch_stats.h"

namespace ns::daemon {

class StepRate {
 public:
  using Clock = std::chrono::steady_clock;
  // The fit covers the steps of the last `window` (at least `min_steps` of them).
  explicit StepRate(std::chrono::milliseconds window = std::chrono::seconds(30), size_t min_steps = 16)
      : window_(window), min_steps_(min_steps) {}

  void add(Clock::time_point start, Clock::time_point end, const BatchStepStats& step);
  // The batch emptied: the next one starts afresh.
  void reset();

  // A job of the batch as the estimate sees it.
  struct Job {
    int64_t context = 0;      // tokens in each of its sequences' KV cache (prompt and completion so far)
    int64_t prompt_left = 0;  // prompt tokens not yet prefilled
    int64_t tokens_left = 0;  // completion tokens to max_tokens, over all its choices
    int sequences = 1;        // its choices decoding together (tokens it gains per step)
  };
  struct Estimate {
    double tok_s = 0;             // its tokens per second at the next step (0: unknown)
    std::optional<double> eta_s;  // nullopt: nothing measured yet
  };
  // Every job's figures, in the order given; all of them make up the batch.
  // `refills`: sequences of queued jobs that will take the places of those
  // that end (one each, from an empty context, staying past the jobs given),
  // so the batch keeps its size while the queue lasts.
  std::vector<Estimate> estimate(std::span<const Job> jobs, int64_t refills = 0) const;

  // Predicted wall time of a step of `tokens` tokens attending `keys` keys (0: nothing measured yet).
  // A step of one token per sequence of contexts summing to C attends C + tokens keys.
  double step_seconds(double tokens, double keys) const;

 private:
  struct Sample {
    Clock::time_point end;
    double tokens = 0, keys = 0, seconds = 0;
    int32_t sequences = 0;
    bool decode_only = false;
  };
  // The current segment (steps since the batch last changed) is fitted alone
  // once it has this many steps over this long, or over keys per step grown
  // this much; before, the whole window.
  static constexpr size_t min_segment_steps_ = 32;
  static constexpr std::chrono::seconds min_segment_{2};
  static constexpr double kKeysGrown = 1.5;
  static constexpr std::chrono::duration<double> kRecent{1.0};  // the price of a key now: the last second
  static constexpr size_t kMaxSegment = 4096;                   // its latest steps, enough to show the trend
  bool least_squares(size_t first, double (&best)[3]) const;
  void fit();
  std::chrono::milliseconds window_;
  size_t min_steps_;
  std::deque<Sample> steps_;
  size_t segment_ = 0;                                 // the last steps_ with the batch as it is now
  double per_step_ = 0, per_token_ = 0, per_key_ = 0;  // the fit: seconds per step, per token, per key
};

}  // namespace ns::daemon
