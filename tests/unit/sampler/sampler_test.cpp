// Sampler: the filter chain keeps the right sets, the draw is a seeded inverse-CDF draw,
// and greedy/penalty/temperature behave as llama.cpp's chain does.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler/sampler.h"
#include "common/error.h"

namespace {

using ns::SamplingParams;
using ns::sampler::Sampler;
using ns::sampler::TokenProb;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every filter off: the distribution is the plain softmax at `temperature`.
SamplingParams unfiltered(float temperature = 1.0f, uint64_t seed = 1) {
  return {.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f, .seed = seed};
}

std::set<int32_t> ids_of(std::span<const TokenProb> kept) {
  std::set<int32_t> ids;
  for (const TokenProb& t : kept) ids.insert(t.id);
  return ids;
}

// Logits whose softmax (temperature 1) is exactly `probs`.
std::vector<float> logits_for(std::initializer_list<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<float> random_logits(size_t n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> l(n);
  for (float& x : l) x = scale * static_cast<float>(gen() % 100000) / 100000.0f;
  return l;
}

int32_t sample_copy(Sampler& s, const std::vector<float>& logits, std::span<const int32_t> history = {}) {
  std::vector<float> row = logits;
  return s.sample(row, history);
}

std::vector<TokenProb> distribution_copy(Sampler& s, const std::vector<float>& logits,
                                         std::span<const int32_t> history = {}) {
  std::vector<float> row = logits;
  const auto d = s.distribution(row, history);
  return {d.begin(), d.end()};
}

// Reference for top-k, top-p, min-p over the whole row: a full sort, a cumulative sum, a threshold.
std::set<int32_t> reference_top_k_top_p(const std::vector<float>& logits, int32_t top_k, float top_p,
                                        float min_p = 0.0f) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  if (top_k > 0 && static_cast<size_t>(top_k) < order.size()) order.resize(top_k);
  double z = 0.0;
  for (int32_t id : order) z += std::exp(logits[id] - logits[order[0]]);
  std::set<int32_t> kept;
  double cumulative = 0.0;
  for (int32_t id : order) {
    kept.insert(id);
    cumulative += std::exp(logits[id] - logits[order[0]]) / z;
    if (cumulative >= top_p) break;
  }
  if (min_p > 0.0f) std::erase_if(kept, [&](int32_t id) { return logits[id] < logits[order[0]] + std::log(min_p); });
  return kept;
}

}  // namespace

TEST_CASE("greedy picks the argmax, ties going to the lowest id") {
  Sampler s(unfiltered(0.0f), 4);
  CHECK(sample_copy(s, {0.1f, 2.5f, -1.0f, 2.4f}) == 1);
  CHECK(sample_copy(s, {1.0f, 3.0f, 3.0f, 2.0f}) == 1);
  CHECK(sample_copy(s, {-kInf, -5.0f, -kInf, -7.0f}) == 1);
  const auto d = distribution_copy(s, {0.0f, 0.0f, 9.0f, 9.0f});
  REQUIRE(d.size() == 1);
  CHECK(d[0].id == 2);
  CHECK(d[0].p == 1.0f);
}

TEST_CASE("top_k = 1 gives the same tokens as greedy, ties included") {
  SamplingParams k1 = unfiltered(0.8f);
  k1.top_k = 1;
  Sampler top1(k1, 1000), greedy(unfiltered(0.0f), 1000);
  std::mt19937 gen(7);
  for (int row = 0; row < 200; ++row) {
    std::vector<float> logits(1000);
    for (float& x : logits) x = static_cast<float>(gen() % 20);  // many ties at the maximum
    CHECK(sample_copy(top1, logits) == sample_copy(greedy, logits));
  }
}

TEST_CASE("top_k keeps exactly the k largest logits") {
  const std::vector<float> logits = random_logits(3000, 10.0f, 3);
  for (int32_t k : {1, 5, 40, 2999, 3000, 5000}) {
    SamplingParams p = unfiltered();
    p.top_k = k;
    Sampler s(p, 3000);
    CHECK(ids_of(distribution_copy(s, logits)) == reference_top_k_top_p(logits, k, 1.0f));
  }
}

TEST_CASE("top_k among equal logits keeps the lowest ids, for small k (heap) and large k (selection)") {
  for (int32_t vocab : {10, 100}) {  // k = 3 is a large share of 10 and a small one of 100
    SamplingParams p = unfiltered();
    p.top_k = 3;
    Sampler s(p, vocab);
    CHECK(ids_of(distribution_copy(s, std::vector<float>(vocab, 0.5f))) == std::set<int32_t>{0, 1, 2});
  }
  std::vector<float> coarse(3000);
  std::mt19937 gen(9);
  for (float& x : coarse) x = static_cast<float>(gen() % 8);  // ~375 tokens share each value
  for (int32_t k : {10, 300, 1000, 2000}) {
    SamplingParams p = unfiltered();
    p.top_k = k;
    Sampler s(p, 3000);
    CAPTURE(k);
    CHECK(ids_of(distribution_copy(s, coarse)) == reference_top_k_top_p(coarse, k, 1.0f));
  }
}

TEST_CASE("top_p keeps the smallest most-likely set reaching p, on a hand-computed distribution") {
  // Probabilities by id: 0.1, 0.5, 0.15, 0.25. By rank: 1 (0.5), 3 (0.25), 2 (0.15), 0 (0.1);
  // cumulative 0.5, 0.75, 0.9, 1.0.
  const std::vector<float> logits = logits_for({0.1, 0.5, 0.15, 0.25});
  struct Case {
    float top_p;
    std::set<int32_t> kept;
  };
  for (const Case& c :
       {Case{0.3f, {1}}, Case{0.6f, {1, 3}}, Case{0.74f, {1, 3}}, Case{0.8f, {1, 3, 2}}, Case{0.95f, {0, 1, 2, 3}}}) {
    SamplingParams p = unfiltered();
    p.top_p = c.top_p;
    Sampler s(p, 4);
    const auto d = distribution_copy(s, logits);
    CHECK(ids_of(d) == c.kept);
    if (c.kept == std::set<int32_t>{1, 3}) {  // renormalised over the kept pair
      REQUIRE(d.size() == 2);
      CHECK(d[0].id == 1);
      CHECK(d[0].p == doctest::Approx(0.5 / 0.75).epsilon(1e-5));
      CHECK(d[1].p == doctest::Approx(0.25 / 0.75).epsilon(1e-5));
    }
  }
}

TEST_CASE("top_p on a large row matches a full-sort reference, with and without top_k") {
  // Peaked rows need one chunk; flat rows force the chunked partial sort to grow several times.
  for (float scale : {0.5f, 5.0f, 40.0f}) {
    const std::vector<float> logits = random_logits(20000, scale, 11);
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.99f}) {
      for (int32_t top_k : {0, 100}) {
        SamplingParams p = unfiltered();
        p.top_p = top_p;
        p.top_k = top_k;
        Sampler s(p, 20000);
        const auto d = distribution_copy(s, logits);
        CAPTURE(scale);
        CAPTURE(top_p);
        CAPTURE(top_k);
        CHECK(ids_of(d) == reference_top_k_top_p(logits, top_k, top_p));
        CHECK(std::is_sorted(d.begin(), d.end(), [](const TokenProb& a, const TokenProb& b) {
          return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
        }));
      }
    }
  }
}

TEST_CASE("top_p walks across gaps in the logits (empty bands below the maximum)") {
  // Logits 0, -3, -7, -12 (shuffled): bands within 1, 2, 4, ... of the max come up empty in between.
  const std::vector<float> logits = {-7.0f, 0.0f, -12.0f, -3.0f};
  struct Case {
    float top_p;
    size_t kept;
  };
  for (const Case c : {Case{0.9f, 1}, Case{0.99f, 2}, Case{0.9995f, 3}, Case{0.9999999f, 4}}) {
    SamplingParams p = unfiltered();
    p.top_p = c.top_p;
    Sampler s(p, 4);
    CAPTURE(c.top_p);
    const auto d = distribution_copy(s, logits);
    CHECK(d.size() == c.kept);
    CHECK(ids_of(d) == reference_top_k_top_p(logits, 0, c.top_p));
  }
}

TEST_CASE("top_p is applied to the top_k survivors, renormalised") {
  // Probabilities 0.4, 0.3, 0.2, 0.1. Alone, top_p 0.5 needs two tokens (0.4 < 0.5 <= 0.7);
  // after top_k 2 the pair is renormalised to 0.571/0.429, so the first token suffices.
  const std::vector<float> logits = logits_for({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = unfiltered();
  p.top_p = 0.5f;
  Sampler alone(p, 4);
  CHECK(ids_of(distribution_copy(alone, logits)) == std::set<int32_t>{0, 1});
  p.top_k = 2;
  Sampler after_k(p, 4);
  CHECK(ids_of(distribution_copy(after_k, logits)) == std::set<int32_t>{0});
}

TEST_CASE("min_p keeps tokens at least min_p times as likely as the best, on a hand-computed distribution") {
  // Probabilities by id: 0.15, 0.1, 0.5, 0.25 (ratios to the best: 0.3, 0.2, 1, 0.5).
  const std::vector<float> logits = logits_for({0.15, 0.1, 0.5, 0.25});
  struct Case {
    float min_p;
    std::set<int32_t> kept;
  };
  for (const Case& c :
       {Case{0.1f, {0, 1, 2, 3}}, Case{0.25f, {0, 2, 3}}, Case{0.4f, {2, 3}}, Case{0.6f, {2}}, Case{0.99f, {2}}}) {
    SamplingParams p = unfiltered();
    p.min_p = c.min_p;
    Sampler s(p, 4);
    CAPTURE(c.min_p);
    const auto unsorted = distribution_copy(s, logits);
    CHECK(ids_of(unsorted) == c.kept);
    p.top_k = 4;  // the same through the sorted path
    Sampler sorted(p, 4);
    CHECK(ids_of(distribution_copy(sorted, logits)) == c.kept);
  }
}

TEST_CASE("min_p on a large row matches the reference, after top_k and top_p or alone") {
  const std::vector<float> logits = random_logits(20000, 8.0f, 23);
  for (float min_p : {0.01f, 0.2f, 0.7f}) {
    for (int32_t top_k : {0, 500}) {
      for (float top_p : {1.0f, 0.95f}) {
        SamplingParams p = unfiltered();
        p.min_p = min_p;
        p.top_k = top_k;
        p.top_p = top_p;
        Sampler s(p, 20000);
        CAPTURE(min_p);
        CAPTURE(top_k);
        CAPTURE(top_p);
        const std::set<int32_t> want = reference_top_k_top_p(logits, top_k, top_p, min_p);
        CHECK(want.size() > 1);
        CHECK(ids_of(distribution_copy(s, logits)) == want);
      }
    }
  }
}

TEST_CASE("filters work on temperature-1 probabilities; temperature only reshapes the survivors") {
  // As in llama.cpp the temperature comes last: a high temperature must not widen top-p's set.
  const std::vector<float> logits = logits_for({0.5, 0.25, 0.15, 0.1});
  SamplingParams p = unfiltered(5.0f);
  p.top_p = 0.7f;
  Sampler s(p, 4);
  const auto d = distribution_copy(s, logits);
  REQUIRE(ids_of(d) == std::set<int32_t>{0, 1});
  // Survivors' weights are softmax(logit / 5): (0.5/0.25)^(1/5) = 2^0.2 in ratio.
  CHECK(d[0].p / d[1].p == doctest::Approx(std::pow(2.0, 0.2)).epsilon(1e-5));
}

TEST_CASE("the distribution is the softmax of logits / temperature") {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f};
  for (float t : {0.25f, 1.0f, 3.0f}) {
    Sampler s(unfiltered(t), 4);
    const auto d = distribution_copy(s, logits);
    REQUIRE(d.size() == 4);
    double z = 0.0;
    for (float l : logits) z += std::exp(l / t);
    for (const TokenProb& tp : d) CHECK(tp.p == doctest::Approx(std::exp(logits[tp.id] / t) / z).epsilon(1e-5));
  }
}

TEST_CASE("temperature moves the empirical distribution the right way (chi-square, fixed seed)") {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f};
  const std::array<float, 3> temperatures = {0.5f, 1.0f, 2.0f};
  const auto expected = [&](float t) {
    std::array<double, 4> p{};
    double z = 0.0;
    for (size_t i = 0; i < 4; ++i) z += p[i] = std::exp(logits[i] / t);
    for (double& x : p) x /= z;
    return p;
  };
  constexpr int kDraws = 20000;
  const auto chi_square = [&](const std::array<int, 4>& counts, const std::array<double, 4>& p) {
    double chi = 0.0;
    for (size_t i = 0; i < 4; ++i) chi += std::pow(counts[i] - kDraws * p[i], 2) / (kDraws * p[i]);
    return chi;
  };
  std::vector<double> share_of_best;
  for (float t : temperatures) {
    Sampler s(unfiltered(t, 2024), 4);
    std::array<int, 4> counts{};
    for (int i = 0; i < kDraws; ++i) ++counts[sample_copy(s, logits)];
    CAPTURE(t);
    // 16.27 is the 0.1 % critical value for 3 degrees of freedom.
    CHECK(chi_square(counts, expected(t)) < 16.27);
    for (float other : temperatures)
      if (other != t) CHECK(chi_square(counts, expected(other)) > 100.0);
    share_of_best.push_back(static_cast<double>(counts[0]) / kDraws);
  }
  CHECK(share_of_best[0] > share_of_best[1]);
  CHECK(share_of_best[1] > share_of_best[2]);
}

TEST_CASE("same seed gives the same sequence; different seeds differ") {
  const std::vector<float> flat(100, 0.0f);
  const auto run = [&](uint64_t seed) {
    Sampler s(unfiltered(1.0f, seed), 100);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 2000; ++i) tokens.push_back(sample_copy(s, flat));
    return tokens;
  };
  const std::vector<int32_t> a = run(42), b = run(42), c = run(43);
  CHECK(a == b);
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != c[i];
  CHECK(differing > 1800);  // chance agreement is 1 in 100
  CHECK(std::set<int32_t>(a.begin(), a.end()).size() == 100);
}

TEST_CASE("a draw is the inverse CDF at mt19937_64's top 53 bits, in the distribution's order") {
  const std::vector<float> logits = random_logits(50, 3.0f, 5);
  SamplingParams p = unfiltered(0.7f, 99);
  p.top_k = 20;
  Sampler s(p, 50);
  std::mt19937_64 reference(99);
  for (int i = 0; i < 500; ++i) {
    const std::vector<TokenProb> d = distribution_copy(s, logits);  // consumes no randomness
    const double target = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    double total = 0.0, cumulative = 0.0;
    for (const TokenProb& t : d) total += t.p;
    int32_t want = d.back().id;
    for (const TokenProb& t : d) {
      cumulative += t.p;
      if (target * total < cumulative) {
        want = t.id;
        break;
      }
    }
    REQUIRE(sample_copy(s, logits) == want);
  }
}

TEST_CASE("every sample() consumes one draw, so skip_draws resumes a sequence") {
  std::vector<float> single(10, -kInf);
  single[4] = 0.0f;  // one candidate: the draw is not needed but still consumed
  const std::vector<float> flat(10, 0.0f);

  Sampler full(unfiltered(1.0f, 5), 10);
  for (int i = 0; i < 7; ++i) CHECK(sample_copy(full, single) == 4);
  Sampler resumed(unfiltered(1.0f, 5), 10);
  resumed.skip_draws(7);
  for (int i = 0; i < 200; ++i) REQUIRE(sample_copy(full, flat) == sample_copy(resumed, flat));
}

TEST_CASE("repetition penalty: divides positive logits, multiplies negative ones, once per token") {
  SamplingParams p = unfiltered();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 64;
  Sampler s(p, 5);
  const std::vector<int32_t> history = {0, 1, 0, 0, 4};
  const auto d = distribution_copy(s, {3.0f, -1.5f, 1.0f, -0.5f, 0.0f}, history);
  REQUIRE(d.size() == 5);
  std::array<float, 5> by_id{};
  for (const TokenProb& t : d) by_id[t.id] = t.logit;
  CHECK(by_id[0] == 1.5f);   // positive, repeated three times: halved once
  CHECK(by_id[1] == -3.0f);  // negative: doubled, i.e. made less likely
  CHECK(by_id[2] == 1.0f);   // not in history
  CHECK(by_id[3] == -0.5f);
  CHECK(by_id[4] == 0.0f);
}

TEST_CASE("repetition penalty looks back only repeat_last_n tokens, and steers greedy") {
  SamplingParams p = unfiltered(0.0f);
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 2;
  Sampler s(p, 3);
  const std::vector<int32_t> history = {2, 0};
  // 1.0 / 1.5 = 0.667 < 0.9: token 0 loses its lead.
  CHECK(sample_copy(s, {1.0f, 0.9f, 0.5f}, history) == 1);
  // The window is the last two tokens {1, 1}: token 2 keeps 1.0 (penalised it would be 0.667 < 0.8).
  CHECK(sample_copy(s, {0.8f, 0.6f, 1.0f}, std::vector<int32_t>{2, 1, 1}) == 2);
  // Negative logits: -1.0 * 1.5 = -1.5 < -1.2.
  CHECK(sample_copy(s, {-1.0f, -1.2f, -9.0f}, history) == 1);
  // repeat_last_n = 0 disables the penalty.
  p.repeat_last_n = 0;
  Sampler off(p, 3);
  CHECK(sample_copy(off, {1.0f, 0.9f, 0.5f}, history) == 0);
}

TEST_CASE("masked (-inf) tokens are never drawn") {
  Sampler s(unfiltered(2.0f, 3), 6);
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 5.0f, -kInf, -3.0f};
  std::set<int32_t> seen;
  for (int i = 0; i < 3000; ++i) seen.insert(sample_copy(s, logits));
  CHECK(seen == std::set<int32_t>{1, 3, 5});
}

TEST_CASE("bad input is reported") {
  using ns::Error;
  using ns::ErrorKind;
  SamplingParams bad = unfiltered();
  bad.top_p = 0.0f;
  try {
    Sampler s(bad, 10);
    FAIL("an invalid top_p was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_input);
    CHECK(std::string(e.what()).find("top_p") != std::string::npos);
  }
  CHECK_THROWS_AS(Sampler(unfiltered(), 0), Error);

  Sampler s(unfiltered(), 3);
  std::vector<float> wrong_size(4, 0.0f);
  CHECK_THROWS_AS(s.sample(wrong_size, {}), Error);
  CHECK_THROWS_AS(sample_copy(s, {0.0f, std::nanf(""), 1.0f}), Error);
  CHECK_THROWS_AS(sample_copy(s, {0.0f, kInf, 1.0f}), Error);
  CHECK_THROWS_AS(sample_copy(s, {-kInf, -kInf, -kInf}), Error);
  Sampler greedy(unfiltered(0.0f), 3);
  CHECK_THROWS_AS(sample_copy(greedy, {0.0f, std::nanf(""), 1.0f}), Error);
  CHECK_THROWS_AS(sample_copy(greedy, {-kInf, -kInf, -kInf}), Error);

  SamplingParams penalised = unfiltered(0.0f);
  penalised.repeat_penalty = 2.0f;
  Sampler ps(penalised, 3);
  CHECK_THROWS_AS(sample_copy(ps, {1.0f, 0.0f, 0.0f}, std::vector<int32_t>{0, 3}), Error);
  CHECK_THROWS_AS(sample_copy(ps, {1.0f, 0.0f, 0.0f}, std::vector<int32_t>{-1}), Error);
  // A rejected history leaves no state behind: token 0 is unpenalised with an empty history.
  CHECK(sample_copy(ps, {1.0f, 0.9f, 0.0f}) == 0);
}
