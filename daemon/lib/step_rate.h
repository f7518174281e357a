// How fast the daemon's batch goes, and so when each of its jobs ends: the
// tok/s and ETA `nightshift status` and `watch` show.
//
// Every job that is decoding gains one token per choice at every step of the
// batch, so a job's rate is the batch's step rate and its ETA the time of the
// steps it has left. A step's wall time is not constant: it grows with the
// tokens in it (jobs joining: a batch's per-job rate falls as it grows; prompt
// chunks) and with the keys they attend to (every context grows by a token a
// step). So the model is t = c + a * tokens + b * keys, fitted by least squares
// over the steps since the batch last changed (jobs joined or left), or the
// recent window while that is too short to show a trend (wall time from one
// step's end to the next: the daemon's own work between steps, such as its
// checkpoint writes, included), and a job's ETA sums the
// predicted times of its remaining steps, with every context growing and the
// batch shrinking as the jobs with fewer tokens left end. A job still in its
// prompt first pays its remaining prompt tokens. A rate measured since a job's
// first token (what the ETAs used before) averages faster steps in: those
// ETAs ran 25-40 % low.
//
// ETAs are to max_tokens (an end-of-text token or a stop string may come
// sooner); jobs that will join later are not foreseen. Not thread-safe (the
// worker thread owns it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "engine/batch_stats.h"

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
    double tok_s = 0;              // its tokens per second at the next step (0: unknown)
    std::optional<double> eta_s;   // nullopt: nothing measured yet
  };
  // Every job's figures, in the order given; all of them make up the batch.
  std::vector<Estimate> estimate(std::span<const Job> jobs) const;

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
  // once it has this many steps over this long; before, the whole window.
  static constexpr size_t min_segment_steps_ = 32;
  static constexpr std::chrono::seconds min_segment_{2};
  static constexpr size_t kMaxSegment = 4096;  // its latest steps, enough to show the trend
  void fit();
  std::chrono::milliseconds window_;
  size_t min_steps_;
  std::deque<Sample> steps_;
  size_t segment_ = 0;  // the last steps_ with the batch as it is now
  double per_step_ = 0, per_token_ = 0, per_key_ = 0;  // the fit: seconds per step, per token, per key
};

}  // namespace ns::daemon
