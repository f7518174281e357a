// A batch's ETA (jobs/batch_eta.h): exact on hand-made sums, then within 25 % of the truth of simulated batch runs
// from 20 % to 80 % of the jobs done (BatchRun: the test model's measured step costs, as step_rate_test's
// BatchSim, with jobs that end at an end-of-text token long before max_tokens, prompts to prefill, a model load,
// heartbeats that report progress every 0.5 s, and the daemon's work at each job's end), where an estimate to
// max_tokens errs +60 % and more (#31 measured +96 % to +102 % at 19 % done).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "jobs/batch_eta.h"

using ns::jobs::batch_eta_s;
using ns::jobs::BatchProgress;

TEST_CASE("batch ETA: the rest of the work at the rate so far, a job's output the done jobs' mean") {
  BatchProgress p;
  CHECK_FALSE(batch_eta_s(p, 1000));  // nothing to run
  p.queued = 10;
  p.queued_max_tokens = 10 * 256;
  CHECK_FALSE(batch_eta_s(p, 1000));  // nothing started
  p.first_started_ms = 1000;
  p.running = 2;
  p.running_max_tokens = 512;
  CHECK_FALSE(batch_eta_s(p, 5000));  // started, nothing produced yet: no rate
  // 4 done with 100 tokens each, 2 running at 30 and 50: 450 tokens in 10 s less a 1 s load = 50 tok/s.
  p.done = 4;
  p.done_tokens = p.result_tokens = 400;
  p.running_generated = 80;
  p.load_ms = 1000;
  const double rate = 480.0 / 9.0;
  // Left: 10 queued x 100 + (2 x 100 - 80) running.
  CHECK(*batch_eta_s(p, 11000) == doctest::Approx((1000 + 120) / rate));
  // Before any is done, max_tokens is the expected output.
  BatchProgress first = p;
  first.done = first.done_tokens = first.result_tokens = 0;
  CHECK(*batch_eta_s(first, 11000) == doctest::Approx((10 * 256 + 2 * 256 - 80) / (80 / 9.0)));
  // Capped at max_tokens: short jobs queued behind long ones.
  BatchProgress capped = p;
  capped.queued_max_tokens = 10 * 40;
  CHECK(*batch_eta_s(capped, 11000) == doctest::Approx((400 + 120) / rate));
  // Running jobs past the mean count nothing more (never a negative rest).
  BatchProgress past = p;
  past.running_generated = 260;
  past.result_tokens = 400;
  CHECK(*batch_eta_s(past, 11000) == doctest::Approx(1000 / (660 / 9.0)));
  // Held jobs are not given: the ETA is the runnable jobs'.
  BatchProgress none = p;
  none.queued = none.queued_max_tokens = none.running = none.running_generated = none.running_max_tokens = 0;
  CHECK_FALSE(batch_eta_s(none, 11000));
}

namespace {

// A daemon running a batch on `slots` sequences, step by step, each step costing what a decode step of the test
// model cost on the shared 2-core test machine (step_rate_test's BatchSim: 0.1 ms a step, 0.05 ms a token, a key
// 0.65 us with one sequence rising to 1.0 us with four, +-10 % at random), 50 times slower (a real
// model's steps, so a batch of 200 runs about 10 minutes), prompts prefilled in the step a job
// joins, 3 ms of database work at each job's end (the outcome's transaction), progress written every 0.5 s.
struct BatchRun {
  struct Job {
    int64_t prompt = 0, max_tokens = 0, length = 0;  // length: where it ends (end-of-text, or max_tokens)
    int64_t generated = 0, reported = 0;             // reported: as of its last progress write
    double started = -1, finished = -1;
  };
  std::vector<Job> jobs;
  int slots = 4;
  double load_s = 20;  // a real model's load
  double slow = 50;    // a real model's steps: the test model's x 50 (a 7B model on the same machine)
  uint64_t rng = 0x2545F4914F6CDD1Dull;

  double uniform() {  // [0, 1)
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return double(rng >> 11) / double(1ull << 53);
  }

  // `n` jobs: prompts of 10..60 tokens; outputs ending at an end-of-text token uniformly in [lo, hi) of
  // max_tokens, `capped` of them running to max_tokens.
  BatchRun(int n, int64_t max_tokens, double lo, double hi, double capped, int slots_ = 4, uint64_t seed = 1)
      : slots(slots_), rng(seed * 0x9E3779B97F4A7C15ull + 7) {
    for (int i = 0; i < n; ++i) {
      Job j;
      j.prompt = 10 + int64_t(uniform() * 50);
      j.max_tokens = max_tokens;
      j.length =
          uniform() < capped ? max_tokens : std::max<int64_t>(1, int64_t(max_tokens * (lo + (hi - lo) * uniform())));
      jobs.push_back(j);
    }
  }

  static double per_key(int sequences) { return 1e-6 * (0.65 + 0.35 * (std::min(sequences, 4) - 1) / 3.0); }

  // Runs the batch to its end; at each job's end the queue's sums as a reader would see them then
  // (`snapshots`, with the time).
  struct Snapshot {
    double t = 0;
    BatchProgress p;
    int64_t done = 0;
  };
  std::vector<Snapshot> run() {
    std::vector<Snapshot> out;
    std::deque<size_t> queue;
    for (size_t i = 0; i < jobs.size(); ++i) queue.push_back(i);
    std::vector<size_t> running;
    double t = 0, next_report = 0.5;
    bool loaded = false;
    int64_t done = 0;
    const auto snapshot = [&]() {
      Snapshot s;
      s.t = t;
      BatchProgress& p = s.p;
      p.first_started_ms = 1;  // t = 0 is 1 ms
      p.load_ms = load_s * 1000;
      for (const Job& j : jobs) {
        if (j.finished >= 0) {
          ++p.done;
          p.done_tokens += j.length;
          p.result_tokens += j.length;
        } else if (j.started >= 0) {
          ++p.running;
          p.running_generated += j.reported;
          p.running_max_tokens += j.max_tokens;
        } else {
          ++p.queued;
          p.queued_max_tokens += j.max_tokens;
        }
      }
      s.done = p.done;
      return s;
    };
    while (!queue.empty() || !running.empty()) {
      if (!loaded) {
        t += load_s;
        loaded = true;
      }
      std::vector<size_t> joining;
      while (int(running.size() + joining.size()) < slots && !queue.empty()) {
        joining.push_back(queue.front());
        queue.pop_front();
      }
      int64_t tokens = 0, keys = 0;
      for (size_t i : running) {
        ++tokens;
        keys += jobs[i].prompt + jobs[i].generated + 1;
      }
      for (size_t i : joining) {
        tokens += jobs[i].prompt;
        keys += jobs[i].prompt * (jobs[i].prompt + 1) / 2;
        jobs[i].started = t;
      }
      const int sequences = int(running.size() + joining.size());
      t += slow * (1e-4 + 5e-5 * double(tokens) + per_key(sequences) * double(keys)) * (1 + 0.1 * (2 * uniform() - 1));
      for (size_t i : running) ++jobs[i].generated;
      for (size_t i : joining) {
        jobs[i].generated = 1;  // the prompt's step samples the first token
        running.push_back(i);
      }
      if (t >= next_report) {
        for (size_t i : running) jobs[i].reported = jobs[i].generated;
        next_report = t + 0.5;
      }
      for (size_t k = running.size(); k-- > 0;) {
        Job& j = jobs[running[k]];
        if (j.generated < j.length) continue;
        t += 0.003;
        j.finished = t;
        ++done;
        running.erase(running.begin() + std::ptrdiff_t(k));
        out.push_back(snapshot());
      }
    }
    return out;
  }
};

struct Errors {
  double worst = 0, to_max_at_20 = 0;
};

// Every snapshot (each job's end) from 20 % of the jobs done to `upto`: the ETA against the truth (the run's end).
Errors check_run(BatchRun run, double tolerance, double upto = 0.8) {
  const size_t n = run.jobs.size();
  const std::vector<BatchRun::Snapshot> snaps = run.run();
  const double end = snaps.back().t;
  Errors e;
  bool first = true;
  for (const BatchRun::Snapshot& s : snaps) {
    if (double(s.done) < 0.2 * double(n) || double(s.done) > upto * double(n)) continue;
    const double now_ms = 1 + s.t * 1000;
    const double eta = *batch_eta_s(s.p, int64_t(now_ms));
    const double truth = end - s.t;
    const double err = (eta - truth) / truth;
    INFO(s.done << " of " << n << " done: ETA " << eta << " s, really " << truth << " s (" << 100 * err << " %)");
    CHECK(std::abs(err) <= tolerance);
    e.worst = std::max(e.worst, std::abs(err));
    if (first) {
      // What an estimate to max_tokens says at the same point.
      BatchProgress to_max = s.p;
      to_max.done_tokens = to_max.done * (to_max.queued_max_tokens / std::max<int64_t>(to_max.queued, 1));
      const double eta_max = *batch_eta_s(to_max, int64_t(now_ms));
      e.to_max_at_20 = (eta_max - truth) / truth;
      first = false;
    }
  }
  MESSAGE("worst error " << 100 * e.worst << " %; to max_tokens at 20 % done: " << 100 * e.to_max_at_20 << " %");
  return e;
}

}  // namespace

TEST_CASE("batch ETA: a nightly batch of 200 jobs ending at end-of-text, within 25 % from 20 % to 80 % done") {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    const Errors e = check_run(BatchRun(200, 256, 0.1, 0.9, 0.1, 4, seed), 0.25);
    CHECK(e.to_max_at_20 > 0.6);  // what an ETA to max_tokens says there: twice too long, as #31 found
  }
}

TEST_CASE("batch ETA: a batch of 8, outputs near max_tokens, within 25 % from 20 % to 80 % done") {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    check_run(BatchRun(120, 512, 0.6, 1.0, 0.3, 8, seed), 0.25);
  }
}

// Where the estimate's limit is: with few jobs, what is left is a few jobs' lengths, which the done jobs' mean
// foretells only so well (here lengths spread from 5 % to 100 % of max_tokens, 9 of them known at 20 % done),
// and near the end a batch's end is its longest job's. Within 50 % to 70 % done.
TEST_CASE("batch ETA: a small batch (40 jobs on 4 slots, lengths 5-100 % of max_tokens), within 50 % to 70 % done") {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    check_run(BatchRun(40, 256, 0.05, 1.0, 0.0, 4, seed), 0.5, 0.7);
  }
}
