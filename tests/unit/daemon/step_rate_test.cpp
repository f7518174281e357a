// The batch's step model behind a running job's tok/s and ETA
// (daemon/lib/step_rate.h): step time = c + a * tokens + b * keys fitted over
// the recent steps, so it follows the batch's size and its growing contexts;
// ETAs sum the remaining steps as the batch shrinks; prefill first.
#include <doctest/doctest.h>

#include <vector>

#include "daemon/lib/step_rate.h"

using ns::BatchStepStats;
using ns::daemon::StepRate;
using Clock = StepRate::Clock;
using namespace std::chrono_literals;

namespace {

// Steps of `sequences` decoding sequences whose contexts start at `context`,
// each taking c + a * tokens + b * keys seconds, back to back from `t`.
Clock::time_point decode(StepRate& r, Clock::time_point t, int steps, int sequences, int64_t context, double c, double a,
                         double b) {
  for (int i = 0; i < steps; ++i) {
    BatchStepStats st;
    st.tokens = st.decode_tokens = st.sequences = sequences;
    st.keys = int64_t{sequences} * (context + i + 1);
    const auto d = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(c + a * st.tokens + b * double(st.keys)));
    r.add(t, t + d, st);
    t += d;
  }
  return t;
}

}  // namespace

TEST_CASE("step model: nothing measured, nothing estimated") {
  StepRate r;
  const std::vector<StepRate::Job> jobs = {{.context = 10, .tokens_left = 100}};
  const auto est = r.estimate(jobs);
  REQUIRE(est.size() == 1);
  CHECK_FALSE(est[0].eta_s);
  CHECK(est[0].tok_s == 0);
}

TEST_CASE("step model: steady steps give tokens left x step time, one token per choice per step") {
  StepRate r;
  decode(r, Clock::time_point{}, 40, 4, 100, 0.05, 0, 0);  // 20 steps/s whatever the context
  std::vector<StepRate::Job> jobs(4, StepRate::Job{.context = 140, .tokens_left = 100});
  for (const auto& e : r.estimate(jobs)) {
    CHECK(*e.eta_s == doctest::Approx(5));
    CHECK(e.tok_s == doctest::Approx(20));
  }
  // One job of 4 choices decoding together: 400 tokens are 100 steps, 4 tokens a step.
  jobs = {StepRate::Job{.context = 140, .tokens_left = 400, .sequences = 4}};
  const auto one = r.estimate(jobs);
  CHECK(*one[0].eta_s == doctest::Approx(5));
  CHECK(one[0].tok_s == doctest::Approx(80));
}

TEST_CASE("step model: steps that slow down as contexts grow; the ETA sums the slower steps ahead") {
  StepRate r;
  const double c = 0.002, a = 0.001, b = 1e-5;
  decode(r, Clock::time_point{}, 300, 2, 200, c, a, b);
  // Two jobs at context 500: the next 100 steps cost c + 2a + b * 2 * (500 + k + 1).
  double expected = 0;
  for (int k = 0; k < 100; ++k) expected += c + 2 * a + b * 2 * (500 + k + 1);
  const std::vector<StepRate::Job> jobs = {{.context = 500, .tokens_left = 100}, {.context = 500, .tokens_left = 100}};
  const auto est = r.estimate(jobs);
  CHECK(*est[0].eta_s == doctest::Approx(expected).epsilon(1e-6));
  // A constant rate from the steps so far would say less: they were faster.
  CHECK(expected > 100 * (c + 2 * a + b * 2 * 350));
  CHECK(est[0].tok_s == doctest::Approx(1 / (c + 2 * a + b * 2 * 501)).epsilon(1e-6));
}

TEST_CASE("step model: the batch as it is now, once it has run a while, not the steps before it changed") {
  StepRate r;
  // Alone, fast; then 4 together whose steps cost 1 ms + 20 us a key for 5 s.
  auto t = decode(r, Clock::time_point{}, 2000, 1, 10, 0.0005, 0, 0);
  decode(r, t, 300, 4, 400, 0.001, 0, 2e-5);
  double expected = 0;
  for (int k = 0; k < 200; ++k) expected += 0.001 + 2e-5 * 4 * (700 + k + 1);
  const std::vector<StepRate::Job> jobs(4, StepRate::Job{.context = 700, .tokens_left = 200});
  CHECK(*r.estimate(jobs)[0].eta_s == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("step model: a batch that grew is priced at its new size, and shrinks as jobs end") {
  StepRate r;
  // Alone for 200 steps, then 4 together for a second (too short a segment
  // to be fitted alone): 10 ms a step plus 10 ms a token.
  auto t = decode(r, Clock::time_point{}, 200, 1, 50, 0.01, 0.01, 0);
  decode(r, t, 20, 4, 250, 0.01, 0.01, 0);
  const std::vector<StepRate::Job> jobs = {{.context = 270, .tokens_left = 10},
                                           {.context = 270, .tokens_left = 100},
                                           {.context = 270, .tokens_left = 100},
                                           {.context = 270, .tokens_left = 100}};
  const auto est = r.estimate(jobs);
  CHECK(est[1].tok_s == doctest::Approx(1 / 0.05));        // not the faster average of the run so far
  CHECK(*est[0].eta_s == doctest::Approx(10 * 0.05));      // 10 steps of 4
  CHECK(*est[1].eta_s == doctest::Approx(10 * 0.05 + 90 * 0.04));  // then 90 of 3
}

TEST_CASE("step model: a job still in its prompt pays the rest of its prompt first") {
  StepRate r;
  // 1 ms a token (batches of 2 and of 6 tell a cost per token from one per step).
  decode(r, decode(r, Clock::time_point{}, 50, 2, 0, 0, 0.001, 0), 50, 6, 50, 0, 0.001, 0);
  const std::vector<StepRate::Job> jobs = {{.context = 10, .tokens_left = 50},
                                           {.context = 0, .prompt_left = 1000, .tokens_left = 50}};
  const auto est = r.estimate(jobs);
  CHECK(*est[0].eta_s == doctest::Approx(50 * 0.002));
  CHECK(*est[1].eta_s == doctest::Approx(50 * 0.002 + 1000 * 0.001));
  CHECK(est[1].tok_s == 0);  // not decoding yet
  r.reset();
  CHECK_FALSE(r.estimate(jobs)[0].eta_s);
}
