// The step loop: stopping rules, determinism, cancellation, input errors.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {
std::unique_ptr<Engine> load(int context = 128) { return Engine::load(test::moe_model(), {.context = context}); }
using test::greedy;
}  // namespace

TEST_CASE("greedy generation is deterministic and stops at max_tokens") {
  auto e = load();
  auto a = e->generate("Once upon a time", greedy(12));
  auto b = e->generate("Once upon a time", greedy(12));
  CHECK(a.finish_reason == "length");
  CHECK(a.tokens.size() == 12);
  CHECK(a.tokens == b.tokens);
  CHECK(a.text == b.text);
  CHECK(a.stats.prompt_tokens > 0);
  CHECK(a.stats.completion_tokens == 12);
  CHECK(a.stats.decode_tok_s > 0);
  CHECK(a.stats.peak_rss_bytes > 0);
}

TEST_CASE("sampling: same seed, same text; another seed, another text") {
  auto e = load();
  SamplingParams p = test::unfiltered(16, 11);
  p.ignore_eos = true;
  auto a = e->generate("The queue", p);
  auto b = e->generate("The queue", p);
  p.seed = 12;
  auto c = e->generate("The queue", p);
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens != c.tokens);
}

TEST_CASE("a stop string ends generation and is not in the text") {
  auto e = load();
  auto full = e->generate("Hello", greedy(24));
  REQUIRE(full.text.size() > 6);
  SamplingParams p = greedy(24);
  const std::string stop = full.text.substr(full.text.size() / 2, 2);
  p.stop = {stop};
  auto cut = e->generate("Hello", p);
  CHECK(cut.finish_reason == "stop");
  CHECK(cut.text == full.text.substr(0, full.text.find(stop)));
}

TEST_CASE("the progress callback can cancel") {
  auto e = load();
  int calls = 0;
  auto r = e->generate("Hello", greedy(50), [&](const GenerationProgress& p) { return ++calls < 4; });
  CHECK(r.finish_reason == "cancelled");
  CHECK(r.tokens.size() < 50);
}

TEST_CASE("bad input is rejected with a clear error") {
  auto e = load(16);
  CHECK_THROWS_WITH_AS(e->generate("", greedy(4)), doctest::Contains("empty"), Error);
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "word ";
  CHECK_THROWS_WITH_AS(e->generate(long_prompt, greedy(4)), doctest::Contains("context"), Error);
  SamplingParams bad = greedy(4);
  bad.top_p = 2.0f;
  CHECK_THROWS_AS(e->generate("Hello", bad), Error);
}

TEST_CASE("loading a missing or corrupt model fails with the path") {
  CHECK_THROWS_WITH_AS(Engine::load("/nonexistent/x.gguf", {}), doctest::Contains("/nonexistent/x.gguf"), Error);
}

// Issue 19: a file of an architecture this build does not run was reported as
// missing '<arch>.embedding_length'. Crafted from a generated llama model with
// general.architecture changed to "mamba" (same length, nothing else moves).
TEST_CASE("an unknown architecture is named, with the supported ones") {
  std::ifstream in(test::dense_model(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "general.architecture";
  const size_t at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  const size_t value = at + key.size() + 4 + 8;  // type (u32), then the string's length (u64)
  REQUIRE(bytes.compare(value, 5, "llama") == 0);
  bytes.replace(value, 5, "mamba");
  const std::string path = std::string(NS_BINARY_DIR) + "/test-models/unknown-arch.gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    Engine::load(path, {});
    FAIL("a mamba model loaded");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(e.kind() == ErrorKind::bad_model);
    CHECK(what.find(path + ": architecture 'mamba'") != std::string::npos);
    CHECK(what.find("is not supported by this build (supported: llama, deepseek2") != std::string::npos);
    CHECK(what.find("missing") == std::string::npos);
  }
}

namespace {
// Resumed generations replay the checkpoint and equal the uninterrupted one
// (for recurrent models: the replay rebuilds the state from position 0).
void check_resume(Engine& e) {
  SamplingParams p{.max_tokens = 14, .temperature = 0.9f, .seed = 5, .ignore_eos = true};
  auto full = e.generate("Resume me", p);
  REQUIRE(full.tokens.size() == 14);
  for (size_t cut : {size_t(1), size_t(6), size_t(13)}) {
    std::vector<int32_t> checkpoint(full.tokens.begin(), full.tokens.begin() + static_cast<long>(cut));
    auto resumed = e.generate("Resume me", p, {}, checkpoint);
    CAPTURE(cut);
    CHECK(resumed.tokens == full.tokens);
    CHECK(resumed.text == full.text);
    CHECK(resumed.finish_reason == full.finish_reason);
  }
}
}  // namespace

TEST_CASE("resuming from checkpointed tokens gives the uninterrupted result") { check_resume(*load()); }

TEST_CASE("kimi-linear: resuming from checkpointed tokens gives the uninterrupted result") {
  check_resume(*Engine::load(test::kimi_linear_model(), {.context = 128}));
}

TEST_CASE("kimi-k3: resuming from checkpointed tokens gives the uninterrupted result") {
  check_resume(*Engine::load(test::kimi_k3_model(), {.context = 128}));
}

TEST_CASE("progress reports prefill and exposes the tokens for checkpoints") {
  auto e = load();
  std::vector<int32_t> seen;
  int prefill_calls = 0;
  auto r = e->generate("Hello there", greedy(5), [&](const GenerationProgress& p) {
    if (p.generated == 0) ++prefill_calls;
    REQUIRE(p.tokens);
    seen = *p.tokens;
    return true;
  });
  CHECK(prefill_calls >= 1);
  CHECK(seen == r.tokens);
}

namespace {
// Five requests through three sequence slots (they join as others finish, so
// slots are reused): each gets exactly the tokens it gets alone.
void check_batched_equals_alone(const std::string& model) {
  auto e = Engine::load(model, {.context = 96, .max_sequences = 3});
  std::vector<std::string> prompts = {"Once upon a time", "The queue runner wakes up at night and", "Hi",
                                      "A much longer prompt that needs several tokens to describe what it wants", "x"};
  std::vector<SamplingParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p{.max_tokens = static_cast<int32_t>(6 + 3 * i),
                     .temperature = i % 2 ? 0.8f : 0.0f,
                     .seed = 100 + i,
                     .ignore_eos = true};
    params.push_back(p);
  }
  std::vector<GenerationResult> alone;
  for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(e->generate(prompts[i], params[i]));

  // Five requests through three sequence slots: they join as others finish.
  auto batch = e->open_batch();
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back({prompts[i], params[i], {}, {}, {}, {}});
  int max_active = 0;
  const std::vector<GenerationResult> together =
      test::run_batch(*batch, requests, [&] { max_active = std::max(max_active, batch->active()); });
  CHECK(max_active == 3);
  for (size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(together[i].tokens == alone[i].tokens);
    CHECK(together[i].text == alone[i].text);
    CHECK(together[i].finish_reason == alone[i].finish_reason);
  }
}
}  // namespace

TEST_CASE("batched generation gives each request the tokens it gets alone") {
  check_batched_equals_alone(test::moe_model());
}

TEST_CASE("kimi-linear: batched generation gives each request the tokens it gets alone (recurrent state per slot)") {
  check_batched_equals_alone(test::kimi_linear_model());
}

TEST_CASE("kimi-k3: batched generation gives each request the tokens it gets alone (attention residuals, latent MoE)") {
  check_batched_equals_alone(test::kimi_k3_model());
}

TEST_CASE("gpt-oss: batched generation gives each request the tokens it gets alone (sliding-window rings per slot)") {
  check_batched_equals_alone(test::gpt_oss_model());
}

TEST_CASE("kimi-k3 with its optional parts off: batched generation gives each request the tokens it gets alone") {
  check_batched_equals_alone(test::kimi_k3_plain_model());
}

TEST_CASE(
    "qwen3next/qwen35moe: batched generation gives each request the tokens it gets alone (delta-net state per slot)") {
  check_batched_equals_alone(test::qwen_next_model("qwen3next"));
  check_batched_equals_alone(test::qwen_next_model("qwen35moe"));
}
