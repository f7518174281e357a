// Logprob records: the raw log-softmax, the top-k order, and the stored form.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/sampler/logprobs.h"

namespace {

using ns::sampler::ChoiceLogprobs;
using ns::sampler::LogprobRecorder;
using ns::sampler::TokenLogprob;

std::vector<float> random_row(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> l(n);
  for (float& x : l) x = static_cast<float>(gen() % 20000) / 1000.0f - 10.0f;
  return l;
}

// log p(t) = logit(t) - log(sum exp(logit)), written out directly in long double.
double log_softmax(const std::vector<float>& row, size_t t) {
  long double z = 0;
  for (const float l : row) z += std::exp(static_cast<long double>(l));
  return static_cast<double>(static_cast<long double>(row[t]) - std::log(z));
}

}  // namespace

TEST_CASE("the chosen token's logprob and the top k are the raw log-softmax of the row") {
  const std::vector<float> row = random_row(1000, 7);
  LogprobRecorder rec(5, 1000);
  rec.observe(row);
  ChoiceLogprobs out;
  rec.append(123, out);
  rec.append(999, out);
  REQUIRE(out.k == 5);
  REQUIRE(out.tokens() == 2);
  CHECK(out.chosen(0).id == 123);
  CHECK(out.chosen(0).logprob == doctest::Approx(log_softmax(row, 123)).epsilon(1e-6));
  CHECK(out.chosen(1).id == 999);
  CHECK(out.chosen(1).logprob == doctest::Approx(log_softmax(row, 999)).epsilon(1e-6));
  // The top 5 by a full sort of the row.
  std::vector<size_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
  for (size_t j = 0; j < 5; ++j) {
    CAPTURE(j);
    CHECK(out.top(0)[j].id == static_cast<int32_t>(ids[j]));
    CHECK(out.top(0)[j].logprob == doctest::Approx(log_softmax(row, ids[j])).epsilon(1e-6));
    CHECK(out.top(1)[j] == out.top(0)[j]);  // the same row: the same alternatives
  }
  // The probabilities of the whole row sum to 1.
  double sum = 0;
  for (size_t t = 0; t < row.size(); ++t) sum += std::exp(log_softmax(row, t));
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-9));
}

TEST_CASE("top logprobs: ties go to the lower id, k is capped at the vocabulary, k = 0 keeps the chosen only") {
  LogprobRecorder rec(3, 4);
  rec.observe(std::vector<float>{1.0f, 2.0f, 2.0f, 0.5f});
  ChoiceLogprobs out;
  rec.append(3, out);
  REQUIRE(out.top(0).size() == 3);
  CHECK(out.top(0)[0].id == 1);
  CHECK(out.top(0)[1].id == 2);
  CHECK(out.top(0)[2].id == 0);
  CHECK(out.top(0)[0].logprob == out.top(0)[1].logprob);

  LogprobRecorder capped(20, 4);
  CHECK(capped.k() == 4);
  LogprobRecorder none(0, 4);
  none.observe(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f});
  ChoiceLogprobs only;
  none.append(2, only);
  CHECK(only.entries.size() == 1);
  CHECK(only.chosen(0).logprob == doctest::Approx(std::log(0.25)));
  CHECK(only.top(0).empty());
}

TEST_CASE("a masked token has logprob -inf and never enters the top k ahead of a finite one") {
  const float inf = std::numeric_limits<float>::infinity();
  LogprobRecorder rec(2, 3);
  rec.observe(std::vector<float>{-inf, 0.0f, 0.0f});
  ChoiceLogprobs out;
  rec.append(0, out);
  CHECK(std::isinf(out.chosen(0).logprob));
  CHECK(out.top(0)[0].id == 1);
  CHECK(out.top(0)[1].id == 2);
  CHECK(out.top(0)[0].logprob == doctest::Approx(std::log(0.5)));
}

TEST_CASE("the stored form round-trips every choice bit for bit, and bad text is refused") {
  std::vector<ChoiceLogprobs> choices(3);
  for (size_t c = 0; c < choices.size(); ++c) {
    LogprobRecorder rec(4, 50);
    for (uint32_t t = 0; t < 2 + c * 3; ++t) {
      rec.observe(random_row(50, t + 10 * static_cast<uint32_t>(c)));
      rec.append(static_cast<int32_t>(t * 7 % 50), choices[c]);
    }
  }
  choices[1].entries[0].logprob = -0.0f;
  const std::string text = ns::sampler::encode_logprobs(choices);
  // 8 bytes of header, 4 per choice, 8 per entry; base64 adds a third.
  size_t entries = 0;
  for (const auto& c : choices) entries += c.entries.size();
  CHECK(text.size() == (8 + 4 * choices.size() + 8 * entries + 2) / 3 * 4);
  const std::vector<ChoiceLogprobs> back = ns::sampler::decode_logprobs(text);
  REQUIRE(back.size() == 3);
  for (size_t c = 0; c < 3; ++c) {
    CHECK(back[c].k == 4);
    REQUIRE(back[c].entries.size() == choices[c].entries.size());
    for (size_t i = 0; i < back[c].entries.size(); ++i) {
      CHECK(back[c].entries[i].id == choices[c].entries[i].id);
      CHECK(std::bit_cast<uint32_t>(back[c].entries[i].logprob) ==
            std::bit_cast<uint32_t>(choices[c].entries[i].logprob));
    }
  }
  CHECK(ns::sampler::encode_logprobs({}).empty());
  CHECK(ns::sampler::decode_logprobs("").empty());
  CHECK_THROWS_AS(ns::sampler::decode_logprobs("abc"), std::invalid_argument);
  CHECK_THROWS_AS(ns::sampler::decode_logprobs(text.substr(0, text.size() - 4)), std::invalid_argument);
  CHECK_THROWS_AS(ns::sampler::decode_logprobs("!!!!"), std::invalid_argument);
}

TEST_CASE("truncate keeps the first tokens' records") {
  LogprobRecorder rec(2, 10);
  ChoiceLogprobs c;
  for (int t = 0; t < 5; ++t) {
    rec.observe(random_row(10, static_cast<uint32_t>(t)));
    rec.append(t, c);
  }
  ChoiceLogprobs d = c;
  d.truncate(3);
  CHECK(d.tokens() == 3);
  CHECK(d.chosen(2) == c.chosen(2));
  d.truncate(10);
  CHECK(d.tokens() == 3);
}
