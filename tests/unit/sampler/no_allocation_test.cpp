// The token loop must not allocate: counts global operator new calls around sample() and
// StopMatcher::feed(). The counter is tests/unit/allocation_counter.h.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"
#include "tests/unit/allocation_counter.h"

namespace {

long allocations_during_sampling(const ns::SamplingParams& params) {
  constexpr int32_t kVocab = 32000;
  ns::sampler::Sampler sampler(params, kVocab);
  std::mt19937 gen(1);
  std::vector<float> source(kVocab), row(kVocab);
  for (float& x : source) x = static_cast<float>(gen() % 1000) / 100.0f;
  std::vector<int32_t> history(200);
  for (int32_t& t : history) t = static_cast<int32_t>(gen() % kVocab);

  const long before = ns_test::allocations();
  for (int i = 0; i < 20; ++i) {
    std::copy(source.begin(), source.end(), row.begin());
    sampler.sample(row, history);
  }
  return ns_test::allocations() - before;
}

}  // namespace

TEST_CASE("sample() does not allocate, on every path of the chain") {
  ns::SamplingParams defaults;  // top_k 40, top_p 0.95, min_p 0.05
  defaults.repeat_penalty = 1.1f;
  CHECK(allocations_during_sampling(defaults) == 0);

  ns::SamplingParams top_p_only = defaults;  // the chunked partial sort
  top_p_only.top_k = 0;
  top_p_only.top_p = 0.9f;
  CHECK(allocations_during_sampling(top_p_only) == 0);

  ns::SamplingParams unfiltered = top_p_only;
  unfiltered.top_p = 1.0f;
  unfiltered.min_p = 0.0f;
  CHECK(allocations_during_sampling(unfiltered) == 0);

  ns::SamplingParams greedy = defaults;
  greedy.temperature = 0.0f;
  CHECK(allocations_during_sampling(greedy) == 0);
}

TEST_CASE("StopMatcher::feed does not allocate within its reserve") {
  ns::sampler::StopMatcher matcher({"</answer>", "\n\n\n"}, 4096);
  const long before = ns_test::allocations();
  for (int i = 0; i < 200 && !matcher.stopped(); ++i) matcher.feed(i % 7 == 0 ? "</ans" : " word\n");
  CHECK(matcher.safe_length() > 0);
  CHECK(ns_test::allocations() - before == 0);
}
