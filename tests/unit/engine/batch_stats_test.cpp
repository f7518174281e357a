// Step and sequence figures of the batch loop: steps add up to the totals,
// sequences' shares add up to the steps, each step takes every routed expert
// once (the union over its tokens), and the routing spread and prefill chunk
// helpers compute what they say.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/batch/generation_batch.h"
#include "engine/model/model.h"
#include "engine/spec/routing_spread.h"
#include "test_models.h"

namespace ns {
namespace {

// 4 MoE layers of 16 experts (4 used), as in weight_streaming_test.cpp: a
// small cache evicts and re-reads.
std::string streaming_model() {
  return test::make_model("stream-moe-q4",
                          "--arch llama --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 256 "
                          "--n-expert 16 --n-expert-used 4 --type Q4_0 --seed 11");
}

std::unique_ptr<Model> load(const std::string& io_mode, int64_t n_seq) {
  return Model::load(streaming_model(),
                     {.engine = {.threads = 2,
                                 .context = 96,
                                 .max_sequences = static_cast<int>(n_seq),
                                 .max_batch_tokens = 16,  // long prompts take several steps, next to decoding ones
                                 .io_mode = io_mode},
                      .tuning = {.max_cache_experts = 6}});
}

struct Outcome {
  std::vector<BatchStepStats> steps;
  std::vector<uint64_t> step_distinct;  // distinct experts per step from the routing observer
  std::vector<GenerationResult> results;
  BatchRunStats totals;
};

// Five requests of different lengths through three slots (they join as others leave).
Outcome run(Model& m) {
  const std::vector<std::string> prompts = {"Once upon a time", "The queue runner wakes up at night and reads", "Hi",
                                            "A much longer prompt that needs more than one chunk of sixteen "
                                            "tokens to go through the model, so it shares steps with decoding",
                                            "x"};
  Outcome o;
  uint64_t distinct = 0;
  m.set_routing_observer([&distinct](const RoutingEvent& e) { distinct += static_cast<uint64_t>(e.distinct); });
  GenerationBatch b(m);
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i)
    requests.push_back({prompts[i], test::greedy(4 + 3 * static_cast<int>(i)), {}, {}, {}, {}});
  o.results = test::run_batch(
      b, requests, [&distinct] { distinct = 0; },
      [&] {
    o.steps.push_back(b.last_step());
    o.step_distinct.push_back(distinct);
      });
  m.set_routing_observer({});
  o.totals = b.totals();
  return o;
}

}  // namespace

TEST_CASE("batch stats: steps add up to the totals, and sequences' shares to the steps") {
  auto m = load("uring", 3);
  const uint64_t bytes_before = m->stream_stats().bytes_read();
  const Outcome o = run(*m);
  BatchRunStats sum;
  bool shared_step = false;
  for (size_t i = 0; i < o.steps.size(); ++i) {
    const BatchStepStats& st = o.steps[i];
    CAPTURE(i);
    sum.add(st);
    CHECK(st.tokens == st.decode_tokens + st.prefill_tokens);
    CHECK(st.sequences >= 1);
    CHECK(st.sequences <= 3);
    CHECK(st.tokens <= 16);
    shared_step |= st.sequences > 1 && st.prefill_tokens > 0 && st.decode_tokens > 0;
    // Each step takes every routed expert once per layer, for all its tokens:
    // one cache lookup per distinct (layer, expert), from the cache or the disk.
    CHECK(st.experts_used == o.step_distinct[i]);
    CHECK(st.experts_cached + st.experts_read == st.experts_used);
    CHECK(st.seconds > 0);
    CHECK(st.compute_s == doctest::Approx(st.seconds - st.io_wait_s));
  }
  CHECK(shared_step);  // a prompt chunk went through next to decoding sequences
  CHECK(sum.steps == o.totals.steps);
  CHECK(sum.tokens == o.totals.tokens);
  CHECK(sum.bytes_read == o.totals.bytes_read);
  CHECK(sum.experts_read == o.totals.experts_read);
  CHECK(o.totals.bytes_read > 0);
  CHECK(o.totals.experts_read > 0);
  // Reads that land after the last step (a prefetch) are in the reader's count only.
  CHECK(o.totals.bytes_read <= m->stream_stats().bytes_read() - bytes_before);

  uint64_t bytes = 0;
  double io_wait_ms = 0, compute_ms = 0, decode_share_ms = 0, decode_ms = 0;
  int64_t generated = 0, prompt = 0;
  bool batched = false;
  for (const GenerationResult& r : o.results) {
    bytes += r.stats.bytes_read;
    io_wait_ms += r.stats.io_wait_ms;
    compute_ms += r.stats.compute_ms;
    decode_share_ms += r.stats.decode_share_ms;
    decode_ms += r.stats.decode_ms;
    CHECK(r.stats.decode_share_ms > 0);
    CHECK(r.stats.decode_share_ms <= r.stats.decode_ms);
    generated += r.stats.completion_tokens;
    prompt += r.stats.prompt_tokens;
    CHECK(r.stats.bytes_read > 0);
    CHECK(r.stats.batch_steps > 0);
    CHECK(r.stats.avg_batch_size >= 1.0);
    CHECK(r.stats.avg_batch_size <= 3.0);
    batched |= r.stats.avg_batch_size > 1.0;
    CHECK(r.stats.cache_hit_rate >= 0.0);
    CHECK(r.stats.cache_hit_rate <= 1.0);
    CHECK(r.stats.read_gib_s > 0);
  }
  CHECK(batched);
  CHECK(bytes == o.totals.bytes_read);  // whole bytes: exact
  CHECK(io_wait_ms == doctest::Approx(o.totals.io_wait_s * 1e3).epsilon(1e-9));
  CHECK(compute_ms == doctest::Approx(o.totals.compute_s * 1e3).epsilon(1e-9));
  CHECK(generated == o.totals.generated);
  // The decode shares split the wall time of the decoding steps, once: the
  // batch's rate is decoded tokens over their sum, not over the summed
  // decode_ms (which counts a step once per job in it).
  CHECK(decode_share_ms == doctest::Approx(o.totals.decode_seconds * 1e3).epsilon(1e-9));
  CHECK(decode_share_ms < decode_ms);
  CHECK(o.totals.decode_seconds < o.totals.seconds);  // the first chunks decoded nothing
  CHECK(prompt == o.totals.prefill_tokens);
  CHECK(o.totals.tokens == o.totals.prefill_tokens + o.totals.decode_tokens);
  // Every sampled token but each request's first comes from a decode step's token.
  CHECK(o.totals.decode_tokens == generated - static_cast<int64_t>(o.results.size()));
  CHECK(o.totals.bytes_per_generated_token() == doctest::Approx(double(o.totals.bytes_read) / double(generated)));
  CHECK(o.totals.io_share() + o.totals.compute_share() == doctest::Approx(1.0));
  CHECK(o.totals.avg_batch_size() > 1.0);
}

TEST_CASE("batch stats: the same requests give the same tokens and expert counts in every io_mode") {
  auto streamed = load("uring", 3);
  auto mapped = load("mmap", 3);
  const Outcome a = run(*streamed), b = run(*mapped);
  REQUIRE(a.results.size() == b.results.size());
  for (size_t i = 0; i < a.results.size(); ++i) CHECK(a.results[i].tokens == b.results[i].tokens);
  CHECK(a.totals.experts_used == b.totals.experts_used);
  // No cache in mmap mode: nothing to split into cached and read.
  CHECK(b.totals.experts_cached == 0);
  CHECK(b.totals.experts_read == 0);
  for (const GenerationResult& r : b.results) CHECK(r.stats.cache_hit_rate == 0.0);
}

TEST_CASE("batch stats: a lone generation carries every step whole") {
  auto m = load("uring", 1);
  GenerationBatch b(*m);
  b.add(
      {"The queue runner wakes up at night and reads the next job from the database", test::greedy(5), {}, {}, {}, {}});
  while (b.step()) {
  }
  auto done = b.take_finished();
  REQUIRE(done.size() == 1);
  const GenerationStats& s = done[0].second.stats;
  CHECK(s.avg_batch_size == 1.0);
  CHECK(s.batch_steps == b.totals().steps);
  CHECK(s.bytes_read == b.totals().bytes_read);
  CHECK(s.io_wait_ms == doctest::Approx(b.totals().io_wait_s * 1e3));
  CHECK(s.compute_ms == doctest::Approx(b.totals().compute_s * 1e3));
  CHECK(s.cache_hit_rate == doctest::Approx(b.totals().cache_hit_rate()));
  CHECK(s.decode_share_ms == doctest::Approx(b.totals().decode_seconds * 1e3));
  CHECK(s.decode_share_ms <= s.decode_ms);  // alone: its decode steps, whole
  // Prompt chunks of 16, then one step per token after the first.
  CHECK(b.totals().steps == (s.prompt_tokens + 15) / 16 + s.completion_tokens - 1);
}

TEST_CASE("routing spread: distinct experts, busiest share and entropy") {
  RoutingSpread spread;
  // Layer 3: 4 tokens x 2 slots spread evenly over experts 0..7; layer 5: all on 0 and 1.
  const int32_t even[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int32_t narrow[8] = {0, 1, 0, 1, 0, 1, 0, 1};
  const float w[8] = {};
  spread.observe({3, 4, 2, 8, even, w, 8});
  spread.observe({5, 4, 2, 8, narrow, w, 2});
  spread.observe({5, 4, 2, 8, narrow, w, 2});
  const auto layers = spread.layers();
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].layer == 3);
  CHECK(layers[0].distinct == 8);
  CHECK(layers[0].busiest_share == doctest::Approx(1.0 / 8));
  CHECK(layers[0].entropy_bits == doctest::Approx(3.0));
  CHECK(layers[1].tokens == 8);
  CHECK(layers[1].distinct == 2);
  CHECK(layers[1].busiest_share == doctest::Approx(0.5));
  CHECK(layers[1].entropy_bits == doctest::Approx(1.0));
  const LayerSpread mean = RoutingSpread::mean(layers);
  CHECK(mean.distinct == 5);
  CHECK(mean.entropy_bits == doctest::Approx(2.0));
}

TEST_CASE("the prefill chunk is sized from the budget in multiples of 64 tokens") {
  CHECK(prefill_chunk_tokens(2800ull << 20, 200 * 1024) == 704);  // 140 MiB / 200 KiB = 716
  CHECK(prefill_chunk_tokens(1ull << 30, 1 << 20) == 64);         // at least 64
  CHECK(prefill_chunk_tokens(64ull << 30, 1024) == 1024);         // at most 1024
  CHECK(prefill_chunk_tokens(0, 1024) == 64);
  for (uint64_t budget : {3ull << 30, 5ull << 30, 9ull << 30}) CHECK(prefill_chunk_tokens(budget, 150000) % 64 == 0);
}

}  // namespace ns
