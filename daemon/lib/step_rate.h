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
// A key's price is not one number: it rises as the batch's KV caches grow
// (measured on the 2-core test machine, the compute thread's CPU time per
// step of eta.sh's model: 0.65 us a key for one job up to 1,500 keys, about
// 1.0 us for four from 2,000 to 11,000 keys; likely the CPU caches, which
// hold one job's KV and not four's). A fit over steps that have not reached
// the batch's size yet prices the keys ahead too low: just after a batch grew
// (segment too short, so the window's fit, mostly steps of the smaller batch)
// the ETAs ran 19-40 % low on a quiet machine. So a key costs at least what
// it costs now: the latest second of the batch as it is now (at least 32
// steps), above what the fit charges per step and per token, per key those
// steps attended; the model's price per key is the larger of the two (the
// price of that rule: a slower second, another process's burst, reads as
// dearer keys, and the ETA errs high until it passes).
// Replayed on 16 recorded runs of eta.sh (the daemon's debug step log), the
// error at mid-run went from a median of -22 % to -7 % in wall time on the
// loaded machine (11 runs), from -21..-34 % to -12..-23 % on a quiet one (5
// runs, the daemon niced over the others), and within 15 % from 7 to 10 of 14
// runs in CPU time. (The -17 % to -48 % eta.sh then measured with the daemon
// niced were its scenario's: a fast run took the snapshot at 1,917 of 2,000
// tokens, 0.06 s before the end; eta.sh now measures at A's half with 5 s or
// more to go.)
//
// The batch as it is now is fitted alone once its keys per step grew by half
// (a slope to fit), not only after 2 s: a niced daemon's batch in eta.sh
// (~1-9 ms steps) had not run 2 s by A's mid-run, and the window's fit, A's
// steps alone mixed in, priced its keys too low. Its steps all have the same
// tokens, so they tell the price of a step of them, split between the step
// and its tokens as the window's fit (which saw other batch sizes) splits it.
// Replayed on 20 runs of eta.sh (the daemon niced, load 11-14 on 2 cores),
// the error at A's half: -21 % to +32 % before, -15 % to +32 % after (mean
// |error| 11.6 % -> 10.6 %; within 15 % in 15 runs both): the low tail (the
// window's fit) is shorter; dropping the price of a key now as well changed
// little (10.1 %, 16 runs). In the daemon, eta.sh (22 runs, niced, load
// 11-14): -38 % to +31 %, within 15 % in 18 (before, 7 runs at load 12-13:
// -19 % to +12.5 %, within 15 % in 6). What is left is the machine's: a
// step's price moves +-25 % from one second to the next with the other
// processes' use of the caches (in the +32 % run it fell 30 % over the 9 s
// after the snapshot), which no past step foresees. Still not foreseen: the
// rise of a key's price as the KV caches grow (measured at that load: 0.55 us
// a key at 1,000 keys a step in the batch of 4, 1.0-1.1 us from 5,000 on; on
// a quiet machine the batch of 4 ran 1,252 tok/s at ~1,900 tokens each,
// about 0.4 us a key, so much of the rise is the other processes' use of the
// caches); a term in keys squared, fitted over the batch as it is now, was
// tried and dropped: on the same runs its errors reached +106 % and +163 % at
// 40 % of A's run.
//
// Queued jobs take the places of jobs that end (`refills`): in a nightly
// batch with more jobs queued than the batch holds, it keeps its size, and
// an estimate that let it shrink said the jobs that outlive the first to end
// end sooner (-26 % in step_rate_test's simulation). The worker passes them
// when its last claim filled every free slot (the queue's depth is not read:
// a count on every job's end), so a queue that held exactly that many makes
// the ETAs of the longer jobs err high. ETAs are to max_tokens (an
// end-of-text token or a stop string may come sooner). Not thread-safe (the
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
  static constexpr size_t kMaxSegment = 4096;  // its latest steps, enough to show the trend
  bool least_squares(size_t first, double (&best)[3]) const;
  void fit();
  std::chrono::milliseconds window_;
  size_t min_steps_;
  std::deque<Sample> steps_;
  size_t segment_ = 0;  // the last steps_ with the batch as it is now
  double per_step_ = 0, per_token_ = 0, per_key_ = 0;  // the fit: seconds per step, per token, per key
};

}  // namespace ns::daemon
