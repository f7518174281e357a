#include "daemon/lib/step_rate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace ns::daemon {

void StepRate::reset() {
  steps_.clear();
  segment_ = 0;
  per_step_ = per_token_ = per_key_ = 0;
}

void StepRate::add(Clock::time_point start, Clock::time_point end, const BatchStepStats& step) {
  if (step.tokens <= 0) return;
  // From the previous step's end: the work between steps is part of the rate.
  const Clock::time_point from = steps_.empty() ? start : std::min(start, steps_.back().end);
  // A new segment when the batch changed: another number of sequences, or prompt tokens in the step.
  const bool same = !steps_.empty() && step.prefill_tokens == 0 && steps_.back().sequences == step.sequences &&
                    steps_.back().decode_only;
  segment_ = same ? std::min(segment_ + 1, kMaxSegment) : 1;
  steps_.push_back({end, double(step.tokens), double(step.keys), std::chrono::duration<double>(end - from).count(),
                    step.sequences, step.prefill_tokens == 0});
  while (steps_.size() > std::max(min_steps_, segment_) && end - steps_.front().end > window_) steps_.pop_front();
  fit();
}

// Least squares for t = c + a * tokens + b * keys over steps_[first..]: the
// normal equations of every subset of the three terms, keeping the best fit
// whose coefficients are all >= 0 (a negative cost is noise; a term that did
// not vary over the steps cannot be told from the others and drops out).
// False if no subset could be solved.
bool StepRate::least_squares(size_t first, double (&best)[3]) const {
  double xx[3][3] = {}, xy[3] = {};
  for (size_t i = first; i < steps_.size(); ++i) {
    const Sample& s = steps_[i];
    const double x[3] = {1, s.tokens, s.keys};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) xx[r][c] += x[r] * x[c];
      xy[r] += x[r] * s.seconds;
    }
  }
  double best_rss = -1;
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], n = 0;
    for (int t = 0; t < 3; ++t)
      if (mask & (1 << t)) idx[n++] = t;
    // Gaussian elimination on the n x n system, partial pivoting.
    double m[3][4] = {};
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) m[r][c] = xx[idx[r]][idx[c]];
      m[r][n] = xy[idx[r]];
    }
    bool ok = true;
    for (int c = 0; c < n && ok; ++c) {
      int piv = c;
      for (int r = c + 1; r < n; ++r)
        if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
      std::swap(m[c], m[piv]);
      if (!(std::abs(m[c][c]) > 1e-9 * std::max(1.0, xx[idx[c]][idx[c]]))) ok = false;
      for (int r = 0; r < n && ok; ++r) {
        if (r == c) continue;
        const double f = m[r][c] / m[c][c];
        for (int k = c; k <= n; ++k) m[r][k] -= f * m[c][k];
      }
    }
    if (!ok) continue;
    double beta[3] = {};
    for (int r = 0; r < n; ++r) {
      beta[idx[r]] = m[r][n] / m[r][r];
      if (!(beta[idx[r]] >= 0)) ok = false;
    }
    if (!ok) continue;
    double rss = 0;  // summed directly: from the sums it cancels badly near a singular system
    for (size_t i = first; i < steps_.size(); ++i) {
      const Sample& s = steps_[i];
      const double e = s.seconds - (beta[0] + beta[1] * s.tokens + beta[2] * s.keys);
      rss += e * e;
    }
    if (best_rss < 0 || rss < best_rss * (1 - 1e-9)) {
      best_rss = rss;
      std::copy(beta, beta + 3, best);
    }
  }
  return best_rss >= 0;
}

void StepRate::fit() {
  // Over the whole window, whose steps of other batch sizes tell a cost per
  // token from one per step; then over the batch as it is now (the current
  // segment) once it has run long enough to show how its steps grow with the
  // contexts (2 s, or its keys per step grown by half: a slope to fit). Its
  // steps all have the same tokens, so they price a step of them and a key;
  // the step's price is split as the window's fit splits it.
  double best[3];
  if (!least_squares(0, best)) return;
  per_step_ = best[0];
  per_token_ = best[1];
  per_key_ = best[2];
  const Sample& since = steps_[steps_.size() - segment_];
  if (segment_ >= min_segment_steps_ && since.decode_only &&
      (steps_.back().end - since.end >= min_segment_ || steps_.back().keys >= kKeysGrown * since.keys) &&
      least_squares(steps_.size() - segment_, best)) {
    const double tokens = steps_.back().tokens, step = best[0] + best[1] * tokens;
    per_token_ = std::min(per_token_, step / tokens);
    per_step_ = step - per_token_ * tokens;
    per_key_ = best[2];
  }
  // The price of a key now: the latest steps of the batch as it is now, above
  // what the fit charges per step and per token, per key they attended.
  if (!steps_.back().decode_only) return;
  double seconds = 0, keys = 0, tokens = 0;
  size_t n = 0;
  for (size_t k = steps_.size(); k-- > steps_.size() - segment_;) {
    seconds += steps_[k].seconds;
    keys += steps_[k].keys;
    tokens += steps_[k].tokens;
    if (++n >= min_segment_steps_ && seconds >= kRecent.count()) break;
  }
  if (n < min_segment_steps_ || keys <= 0) return;
  per_key_ = std::max(per_key_, (seconds - per_step_ * double(n) - per_token_ * tokens) / keys);
}

double StepRate::step_seconds(double tokens, double keys) const {
  return per_step_ + per_token_ * tokens + per_key_ * keys;
}

std::vector<StepRate::Estimate> StepRate::estimate(std::span<const Job> jobs, int64_t refills) const {
  std::vector<Estimate> out(jobs.size());
  if (steps_.empty() || !(per_step_ > 0 || per_token_ > 0 || per_key_ > 0)) return out;
  // Steps each job has left; the batch runs them together, shrinking as jobs
  // end, unless queued jobs take their places.
  std::vector<int64_t> steps_left(jobs.size());
  double tokens = 0, context = 0;  // the decoding batch: tokens per step, sum of sequence contexts
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const int n = std::max(j.sequences, 1);
    steps_left[i] = (std::max<int64_t>(j.tokens_left, 0) + n - 1) / n;
    tokens += n;
    context += double(n) * double(j.context + j.prompt_left);
  }
  const double next = step_seconds(tokens, context + tokens);
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return steps_left[x] < steps_left[y]; });
  double elapsed = 0;
  int64_t done = 0;  // steps simulated so far
  for (size_t i : order) {
    const Job& j = jobs[i];
    const int n = std::max(j.sequences, 1);
    // Steps done..L-1: step k costs a * tokens + b * (context + tokens * (k + 1)).
    const double m = double(steps_left[i] - done), L = double(steps_left[i]), k0 = double(done);
    elapsed +=
        (per_step_ + per_token_ * tokens) * m + per_key_ * (context * m + tokens * (L * (L + 1) - k0 * (k0 + 1)) / 2);
    done = steps_left[i];
    double eta = elapsed;
    if (j.prompt_left > 0) {  // its prompt first: tokens at positions context..context+left-1
      const double p = double(j.prompt_left), c = double(j.context);
      eta += per_token_ * p + per_key_ * (p * c + p * (p + 1) / 2);
    }
    out[i].eta_s = eta;
    out[i].tok_s = next > 0 && j.prompt_left == 0 ? double(n) / next : 0;
    tokens -= n;
    context -= double(n) * double(j.context + j.prompt_left);
    // Queued jobs take its sequences from step L on, from an empty context:
    // one of them attends (k + 1) - L keys at step k.
    const int64_t r = std::min<int64_t>(n, std::max<int64_t>(refills, 0));
    refills -= r;
    tokens += double(r);
    context -= L * double(r);
  }
  return out;
}

}  // namespace ns::daemon
