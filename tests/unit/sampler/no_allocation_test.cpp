// The token loop must not allocate: counts global operator new calls around sample() and
// StopMatcher::feed(). Replacing operator new here affects the whole test binary, which only
// costs a counter increment elsewhere.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// GCC flags free() on memory from operator new once these are inlined, not knowing that
// this operator new is malloc: the pairing is right by construction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

long allocations_during_sampling(const ns::SamplingParams& params) {
  constexpr int32_t kVocab = 32000;
  ns::sampler::Sampler sampler(params, kVocab);
  std::mt19937 gen(1);
  std::vector<float> source(kVocab), row(kVocab);
  for (float& x : source) x = static_cast<float>(gen() % 1000) / 100.0f;
  std::vector<int32_t> history(200);
  for (int32_t& t : history) t = static_cast<int32_t>(gen() % kVocab);

  const long before = g_allocations.load();
  for (int i = 0; i < 20; ++i) {
    std::copy(source.begin(), source.end(), row.begin());
    sampler.sample(row, history);
  }
  return g_allocations.load() - before;
}

}  // namespace

TEST_CASE("the counter sees allocations (so a zero below means something)") {
  const long before = g_allocations.load();
  auto* v = new std::vector<int>(100);
  delete v;
  CHECK(g_allocations.load() - before >= 2);
}

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
  const long before = g_allocations.load();
  for (int i = 0; i < 200 && !matcher.stopped(); ++i) matcher.feed(i % 7 == 0 ? "</ans" : " word\n");
  CHECK(matcher.safe_length() > 0);
  CHECK(g_allocations.load() - before == 0);
}
