// Several choices of one prompt (params.n) and per-token logprobs
// (params.logprobs): choice k equals the single-choice request with seed + k
// on an attention model and a kimi-linear one (the prompt's state copied into
// the other slots), logprobs equal the log-softmax of the logits the model
// gives, and a resumed request reports what an uninterrupted one does.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "engine/model/model.h"
#include "engine/state/sequence_state.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

SamplingParams sampled(int32_t max_tokens, uint64_t seed) {
  return {.max_tokens = max_tokens, .temperature = 0.9f, .seed = seed, .ignore_eos = true};
}

// max_batch_tokens: tokens per forward pass (0: from the budget); a small one
// keeps sliding layers' rings (window + chunk) shorter than the context.
std::unique_ptr<Engine> load(const std::string& model, int slots, int max_batch_tokens = 0) {
  return Engine::load(model, {.context = 96, .max_sequences = slots, .max_batch_tokens = max_batch_tokens});
}

void check_choices_equal_seeds(const std::string& model, int max_batch_tokens = 0) {
  auto e = load(model, 4, max_batch_tokens);
  const std::string prompt = "The queue runner wakes up at night and";
  SamplingParams p = sampled(9, 40);
  p.logprobs = true;
  p.top_logprobs = 2;
  std::vector<GenerationResult> alone;
  for (int k = 0; k < 3; ++k) {
    SamplingParams q = p;
    q.seed = p.seed + static_cast<uint64_t>(k);
    alone.push_back(e->generate(prompt, q));
  }
  // Three choices next to a single-choice request of another prompt.
  auto batch = e->open_batch();
  SamplingParams three = p;
  three.n = 3;
  const int h = batch->add({prompt, three, {}, {}, {}, {}});
  const int other = batch->add({"Hi", sampled(5, 3), {}, {}, {}, {}});
  CHECK(batch->free_slots() == 0);
  std::map<int, GenerationResult> done;
  while (batch->step())
    for (auto& [handle, r] : batch->take_finished()) done[handle] = std::move(r);
  for (auto& [handle, r] : batch->take_finished()) done[handle] = std::move(r);
  REQUIRE(done.count(h) == 1);
  REQUIRE(done.count(other) == 1);
  const GenerationResult& r = done[h];
  REQUIRE(r.more_choices.size() == 2);
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    const GenerationChoice& c =
        k == 0 ? static_cast<const GenerationChoice&>(r) : r.more_choices[static_cast<size_t>(k - 1)];
    CHECK(c.tokens == alone[static_cast<size_t>(k)].tokens);
    CHECK(c.text == alone[static_cast<size_t>(k)].text);
    CHECK(c.finish_reason == alone[static_cast<size_t>(k)].finish_reason);
    CHECK(c.logprobs == alone[static_cast<size_t>(k)].logprobs);
  }
  // The seeds differ, so (with these models and 9 sampled tokens) do the texts.
  CHECK(r.tokens != r.more_choices[0].tokens);
  // Usage as OpenAI counts it: the prompt once, the completions summed.
  CHECK(r.stats.prompt_tokens == alone[0].stats.prompt_tokens);
  CHECK(r.stats.completion_tokens == 27);
  CHECK(done[other].tokens == e->generate("Hi", sampled(5, 3)).tokens);
}

}  // namespace

TEST_CASE("n choices: choice k equals the single request with seed + k (attention cache copied)") {
  check_choices_equal_seeds(test::moe_model());
}

TEST_CASE("kimi-linear: n choices: choice k equals the single request with seed + k (recurrent state copied)") {
  check_choices_equal_seeds(test::kimi_linear_model());
}

TEST_CASE("gpt-oss: n choices: choice k equals the single request with seed + k (sliding rings copied)") {
  // Window 8, 8 tokens a forward pass: rings of 16 rows, wrapped by the prompt and 9 tokens.
  check_choices_equal_seeds(test::gpt_oss_model(), 8);
}

TEST_CASE("n above the model's sequence slots is refused, naming the fix") {
  auto e = load(test::moe_model(), 2);
  SamplingParams p = sampled(4, 1);
  p.n = 3;
  try {
    e->generate("Hello", p);
    FAIL("n = 3 on 2 slots was accepted");
  } catch (const Error& err) {
    CHECK(err.kind() == ErrorKind::invalid_input);
    CHECK(std::string(err.what()).find("raise max_batch") != std::string::npos);
  }
}

TEST_CASE("SequenceState::copy_sequence copies the attention rows and the recurrent state, nothing more") {
  SequenceLayout layout{.k_dim = 3, .v_dim = 2, .conv_floats = 4, .state_floats = 5, .attends = {1, 0, 1}};
  SequenceState st(3, 3, 8, layout);
  for (int64_t seq = 0; seq < 3; ++seq)
    for (int64_t il : {0, 2})
      for (int64_t pos = 0; pos < 8; ++pos) {
        for (int i = 0; i < 3; ++i) st.k(il, seq, pos)[i] = static_cast<uint16_t>(1000 * seq + 100 * il + 10 * pos + i);
        for (int i = 0; i < 2; ++i) st.v(il, seq, pos)[i] = static_cast<uint16_t>(5000 + 1000 * seq + 10 * pos + i);
      }
  for (int64_t seq = 0; seq < 3; ++seq) {
    for (int i = 0; i < 4; ++i) st.conv(1, seq)[i] = static_cast<float>(seq * 10 + i);
    for (int i = 0; i < 5; ++i) st.recurrent(1, seq)[i] = static_cast<float>(seq * 100 + i);
  }
  st.copy_sequence(1, 2, 5);
  for (int64_t il : {0, 2})
    for (int64_t pos = 0; pos < 8; ++pos) {
      CAPTURE(il);
      CAPTURE(pos);
      const int64_t from = pos < 5 ? 1 : 2;  // positions past the copy keep their own rows
      for (int i = 0; i < 3; ++i) CHECK(st.k(il, 2, pos)[i] == 1000 * from + 100 * il + 10 * pos + i);
      for (int i = 0; i < 2; ++i) CHECK(st.v(il, 2, pos)[i] == 5000 + 1000 * from + 10 * pos + i);
      for (int i = 0; i < 3; ++i) CHECK(st.k(il, 0, pos)[i] == 100 * il + 10 * pos + i);  // others untouched
    }
  for (int i = 0; i < 4; ++i) CHECK(st.conv(1, 2)[i] == static_cast<float>(10 + i));
  for (int i = 0; i < 5; ++i) CHECK(st.recurrent(1, 2)[i] == static_cast<float>(100 + i));
  CHECK(st.recurrent(1, 0)[0] == 0.0f);
  CHECK_THROWS_AS(st.copy_sequence(0, 3, 1), Error);
  CHECK_THROWS_AS(st.copy_sequence(0, 1, 9), Error);
}

TEST_CASE("logprobs are the log-softmax of the model's own logits at each generated position") {
  auto e = load(test::moe_model(), 1);
  SamplingParams p = sampled(6, 9);
  p.logprobs = true;
  p.top_logprobs = 4;
  p.repeat_penalty = 1.3f;  // the penalty changes the draw, never the reported numbers
  const std::string prompt = "Once upon a time";
  const GenerationResult r = e->generate(prompt, p);
  REQUIRE(r.tokens.size() == 6);
  REQUIRE(r.logprobs.k == 4);
  REQUIRE(r.logprobs.tokens() == 6);

  auto m = Model::load(test::moe_model(), {.engine = {.context = 96}});
  std::vector<int32_t> seq = m->tokenizer().encode(prompt, true, true);
  const size_t n_prompt = seq.size();
  seq.insert(seq.end(), r.tokens.begin(), r.tokens.end());
  std::vector<float> logits;
  m->forward(seq, 0, /*all_logits=*/true, logits);
  const size_t V = static_cast<size_t>(m->n_vocab());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    CAPTURE(i);
    const float* row = &logits[(n_prompt - 1 + i) * V];
    double max = row[0], z = 0;
    for (size_t t = 0; t < V; ++t) max = std::max(max, double(row[t]));
    for (size_t t = 0; t < V; ++t) z += std::exp(double(row[t]) - max);
    const double log_z = max + std::log(z);
    CHECK(r.logprobs.chosen(i).id == r.tokens[i]);
    CHECK(r.logprobs.chosen(i).logprob == doctest::Approx(row[r.tokens[i]] - log_z).epsilon(1e-3));
    const auto top = r.logprobs.top(i);
    for (size_t j = 0; j < top.size(); ++j) {
      CHECK(top[j].logprob == doctest::Approx(row[top[j].id] - log_z).epsilon(1e-3));
      if (j > 0) CHECK(top[j].logprob <= top[j - 1].logprob);
    }
    // Nothing outside the top k beats its last entry.
    for (size_t t = 0; t < V; ++t)
      if (row[t] - log_z > top.back().logprob + 1e-3) {
        bool listed = false;
        for (const auto& x : top) listed |= x.id == static_cast<int32_t>(t);
        CHECK(listed);
      }
  }
}

TEST_CASE("a resumed request reports the logprobs of an uninterrupted one, for every choice") {
  for (const std::string& model : {test::moe_model(), test::kimi_linear_model()}) {
    CAPTURE(model);
    auto e = load(model, 3);
    SamplingParams p = sampled(10, 21);
    p.logprobs = true;
    p.top_logprobs = 3;
    p.n = 2;
    const GenerationResult full = e->generate("Resume me", p);
    REQUIRE(full.more_choices.size() == 1);
    for (size_t cut : {size_t(1), size_t(7)}) {
      CAPTURE(cut);
      GenerationRequest req;
      req.prompt = "Resume me";
      req.params = p;
      req.resume.assign(full.tokens.begin(), full.tokens.begin() + static_cast<long>(cut));
      req.resume_logprobs = full.logprobs;
      req.resume_logprobs.truncate(cut);
      GenerationChoice second = full.more_choices[0];  // a different cut for choice 1
      second.tokens.resize(cut + 2);
      second.logprobs.truncate(cut + 2);
      req.resume_more.push_back(second);
      const GenerationResult resumed =
          GenerationBatch::run_all(*Model::load(model, {.engine = {.context = 96, .max_sequences = 3}}), {req})[0];
      CHECK(resumed.tokens == full.tokens);
      CHECK(resumed.logprobs == full.logprobs);
      REQUIRE(resumed.more_choices.size() == 1);
      CHECK(resumed.more_choices[0].tokens == full.more_choices[0].tokens);
      CHECK(resumed.more_choices[0].logprobs == full.more_choices[0].logprobs);
    }
    // A checkpoint without the records of its tokens replays only as far as they go.
    GenerationRequest partial;
    partial.prompt = "Resume me";
    partial.params = p;
    partial.params.n = 1;
    partial.resume = full.tokens;
    partial.resume_logprobs = full.logprobs;
    partial.resume_logprobs.truncate(3);
    const GenerationResult r = GenerationBatch::run_all(*Model::load(model, {.engine = {.context = 96}}), {partial})[0];
    CHECK(r.tokens == full.tokens);
    CHECK(r.logprobs == full.logprobs);
  }
}
