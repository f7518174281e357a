// Prefix sharing (docs/architecture.md): requests whose prompts begin alike
// prefill the common part once; the others copy its snapshot. Every request's
// tokens equal those of the same run with sharing off, on an attention MoE
// model, deepseek2 (MLA latent rows), kimi-linear (KDA recurrent state) and
// gpt-oss (sliding rings, wrapped by the prefix); the batch's totals show the
// shared part prefilled once. Also: eviction (a slot and rows wanted),
// different prefixes side by side, a resumed request, n > 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "engine/model/model.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

std::unique_ptr<Model> load(const std::string& path, int64_t n_seq, int64_t prefix_cache, int64_t max_batch = 0,
                            int64_t kv_tokens = 0) {
  return Model::load(path, {.engine = {.context = 1024,
                                       .max_sequences = static_cast<int>(n_seq),
                                       .max_batch_tokens = static_cast<int>(max_batch),
                                       .kv_tokens = kv_tokens,
                                       .prefix_cache = static_cast<int>(prefix_cache)}});
}

// A long shared instruction (a JSONL batch's system prompt) and a per-job tail.
std::string system_prompt(const std::string& topic, int reps = 6) {
  std::string s = "You are a careful reviewer of " + topic + ". Read the document below, keep its tone, ";
  for (int i = 0; i < reps; ++i) s += "answer in plain words, cite the section you rely on, and never invent figures. ";
  return s;
}

GenerationRequest job(const std::string& prompt, uint64_t seed, int max_tokens = 6) {
  GenerationRequest r;
  r.prompt = prompt;
  r.params.temperature = 0.8f;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// The snapshot length two prompts share: their common tokens, at most the
// shorter one's length - 1, down to a multiple of the block.
int64_t shared_len(const Model& m, const std::string& a, const std::string& b) {
  const auto ta = m.tokenizer().encode(a, true, true), tb = m.tokenizer().encode(b, true, true);
  const size_t n = std::min({ta.size(), tb.size()}) - 1;
  const auto diff = std::mismatch(ta.begin(), ta.begin() + static_cast<long>(n), tb.begin());
  const int64_t common = diff.first - ta.begin();
  return common / GenerationBatch::kPrefixBlock * GenerationBatch::kPrefixBlock;
}

struct Run {
  std::vector<GenerationResult> results;
  BatchRunStats totals;
};
Run run(Model& m, const std::vector<GenerationRequest>& reqs, bool sharing) {
  Run r;
  r.results = GenerationBatch::run_all(m, reqs, sharing, &r.totals);
  return r;
}

void check_same_tokens(const Run& on, const Run& off) {
  REQUIRE(on.results.size() == off.results.size());
  for (size_t i = 0; i < on.results.size(); ++i) {
    CAPTURE(i);
    CHECK(on.results[i].tokens == off.results[i].tokens);
    CHECK(on.results[i].finish_reason == off.results[i].finish_reason);
    REQUIRE(on.results[i].more_choices.size() == off.results[i].more_choices.size());
    for (size_t k = 0; k < on.results[i].more_choices.size(); ++k)
      CHECK(on.results[i].more_choices[k].tokens == off.results[i].more_choices[k].tokens);
  }
}

// Five jobs of one system prompt, three slots: the first two join together
// (the first's prefill stops at the common part and is snapshotted, the
// second copies it), the later ones join as slots free and copy the kept
// snapshot. Tokens equal the run without sharing; the shared part is
// prefilled once.
void check_shared_equals_unshared(const std::string& path, int64_t max_batch = 0) {
  auto m = load(path, 3, 2, max_batch);
  const std::string sys = system_prompt("quarterly reports");
  std::vector<GenerationRequest> reqs;
  const char* tails[] = {"Section 1: revenue grew.", "Section 2: costs fell sharply.", "Summary please.",
                         "Section 4: the outlook is mixed", "List the risks."};
  for (int i = 0; i < 5; ++i) reqs.push_back(job(sys + tails[i], 100 + static_cast<uint64_t>(i)));
  const int64_t P = shared_len(*m, reqs[0].prompt, reqs[1].prompt);
  REQUIRE(P >= GenerationBatch::kPrefixMin);
  for (int i = 2; i < 5; ++i) REQUIRE(shared_len(*m, reqs[0].prompt, reqs[static_cast<size_t>(i)].prompt) == P);

  const Run off = run(*m, reqs, false);
  const Run on = run(*m, reqs, true);
  check_same_tokens(on, off);
  CHECK(off.totals.prefix_tokens == 0);
  CHECK(on.results[0].stats.prefix_tokens == 0);  // the producer computed it
  for (size_t i = 1; i < 5; ++i) CHECK(on.results[i].stats.prefix_tokens == static_cast<uint64_t>(P));
  // Prefilled once: 4 x P prompt tokens copied instead of computed.
  CHECK(on.totals.prefix_tokens == 4 * P);
  CHECK(on.totals.prefill_tokens == off.totals.prefill_tokens - 4 * P);
}

}  // namespace

TEST_CASE("prefix sharing: jobs of one system prompt get the tokens they get unshared (llama MoE)") {
  check_shared_equals_unshared(test::moe_model());
}

TEST_CASE("prefix sharing: deepseek2 (MLA latent rows copied)") {
  check_shared_equals_unshared(test::make_model(
      "ds2lite-prefix",
      "--arch deepseek2 --n-embd 64 --n-layer 2 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 "
      "--q-lora-rank 0 --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 32 "
      "--n-shared-expert 1 --n-dense-lead 1 --gating softmax --rms-eps 1e-6 --type Q8_0 --seed 13"));
}

TEST_CASE("prefix sharing: kimi-linear (KDA recurrent state snapshotted after exactly the prefix)") {
  check_shared_equals_unshared(test::kimi_linear_model());
}

TEST_CASE("prefix sharing: gpt-oss (sliding rings wrapped by the prefix)") {
  // Window 8, 8 tokens a forward pass: rings of 16 rows, far shorter than the prefix.
  check_shared_equals_unshared(test::gpt_oss_model(), 8);
}

TEST_CASE("prefix sharing: snapshots are evicted least recently used, and give their rows to a joining job") {
  const std::string path = test::moe_model();
  {  // One snapshot slot, two system prompts in turn: each pair evicts the other's snapshot.
    auto m = load(path, 2, 1);
    const std::string a = system_prompt("legal contracts"), b = system_prompt("medical notes");
    std::vector<GenerationRequest> reqs = {job(a + "Clause 1.", 1), job(a + "Clause 2.", 2), job(b + "Note 1.", 3),
                                           job(b + "Note 2.", 4),   job(a + "Clause 3.", 5), job(a + "Clause 4.", 6)};
    const Run off = run(*m, reqs, false), on = run(*m, reqs, true);
    check_same_tokens(on, off);
    const int64_t pa = shared_len(*m, reqs[0].prompt, reqs[1].prompt),
                  pb = shared_len(*m, reqs[2].prompt, reqs[3].prompt);
    CHECK(on.results[1].stats.prefix_tokens == static_cast<uint64_t>(pa));
    CHECK(on.results[3].stats.prefix_tokens == static_cast<uint64_t>(pb));
    CHECK(on.results[5].stats.prefix_tokens == static_cast<uint64_t>(pa));
    CHECK(on.totals.prefix_tokens == 2 * pa + pb);
  }
  {  // A pool of exactly two jobs and one snapshot: a longer job needs the snapshot's rows.
    auto probe = load(path, 2, 1);
    const std::string a = system_prompt("shipping logs", 2);
    std::vector<GenerationRequest> pair = {job(a + "Day 1.", 7), job(a + "Day 2.", 8)};
    const int64_t n1 = static_cast<int64_t>(probe->tokenizer().encode(pair[0].prompt, true, true).size());
    const int64_t n2 = static_cast<int64_t>(probe->tokenizer().encode(pair[1].prompt, true, true).size());
    const int64_t P = shared_len(*probe, pair[0].prompt, pair[1].prompt);
    const int64_t pool = n1 + 6 + n2 + 6 + P;
    auto m = load(path, 2, 1, 0, pool);
    REQUIRE(m->sequence_state().pool_rows() == pool);
    GenerationBatch batch(*m);
    for (auto& r : pair) REQUIRE(batch.add(r) != GenerationBatch::kNoRoom);
    while (batch.step()) {
    }
    auto done = batch.take_finished();
    REQUIRE(done.size() == 2);
    CHECK(batch.prefix_entries() == 1);  // kept after both left, holding P rows
    CHECK(batch.largest_free_rows() == pool - P);
    // A job needing more than the rows free beside the snapshot: it is evicted, the job joins.
    GenerationRequest big = job("Unrelated text that shares nothing.", 9);
    const int64_t big_prompt = static_cast<int64_t>(m->tokenizer().encode(big.prompt, true, true).size());
    big.params.max_tokens = static_cast<int>(pool - P - big_prompt + 1);
    REQUIRE(batch.add(big) != GenerationBatch::kNoRoom);
    CHECK(batch.prefix_entries() == 0);
  }
}

TEST_CASE("prefix sharing: different prefixes side by side share nothing across; a snapshot's memory is planned") {
  const std::string path = test::kimi_linear_model();
  auto m = load(path, 4, 2);
  // Each snapshot slot has its own recurrent state, counted by the memory plan.
  const SequenceState& st = m->sequence_state();
  CHECK(m->prefix_slots() == 2);
  CHECK(st.recurrent_bytes() == 6 * st.recurrent_bytes_per_sequence());
  const std::string a = system_prompt("court rulings"), b = system_prompt("field surveys");
  std::vector<GenerationRequest> reqs = {job(a + "Case 1.", 11), job(b + "Site 1.", 12), job(a + "Case 2.", 13),
                                         job(b + "Site 2.", 14)};
  // The two system prompts differ early: below the minimum, nothing is shared between them.
  REQUIRE(shared_len(*m, reqs[0].prompt, reqs[1].prompt) < GenerationBatch::kPrefixMin);
  const Run off = run(*m, reqs, false), on = run(*m, reqs, true);
  check_same_tokens(on, off);
  CHECK(on.results[2].stats.prefix_tokens == static_cast<uint64_t>(shared_len(*m, reqs[0].prompt, reqs[2].prompt)));
  CHECK(on.results[3].stats.prefix_tokens == static_cast<uint64_t>(shared_len(*m, reqs[1].prompt, reqs[3].prompt)));
  CHECK(on.results[0].stats.prefix_tokens == 0);
  CHECK(on.results[1].stats.prefix_tokens == 0);
}

TEST_CASE("prefix sharing: a resumed job replays its checkpoint after the copy; n > 1 copies the prefix once") {
  for (const std::string& path : {test::moe_model(), test::kimi_linear_model()}) {
    CAPTURE(path);
    auto m = load(path, 4, 2);
    const std::string a = system_prompt("release notes");
    std::vector<GenerationRequest> reqs = {job(a + "Version 1.", 21, 8), job(a + "Version 2.", 22, 8)};
    const Run full = run(*m, reqs, false);
    // The second job resumes from a checkpoint of 3 tokens, next to the first.
    reqs[1].resume.assign(full.results[1].tokens.begin(), full.results[1].tokens.begin() + 3);
    const Run resumed = run(*m, reqs, true);
    check_same_tokens(resumed, full);
    CHECK(resumed.results[1].stats.prefix_tokens > 0);
    // n = 2 on the shared prefix: the leader copies it, its choices copy the leader's prompt state.
    std::vector<GenerationRequest> choices = {job(a + "Version 3.", 23, 8), job(a + "Version 4.", 24, 8)};
    choices[1].params.n = 2;
    const Run off = run(*m, choices, false), on = run(*m, choices, true);
    check_same_tokens(on, off);
    CHECK(on.results[1].more_choices.size() == 1);
    CHECK(on.results[1].stats.prefix_tokens ==
          static_cast<uint64_t>(shared_len(*m, choices[0].prompt, choices[1].prompt)));
  }
}

TEST_CASE("prefix sharing: a twin request copies its producer's state and gets its tokens bit for bit") {
  // The same prompt and seed twice: the second copies the first's snapshot,
  // and both equal the request alone in one prefill chunk or in chunks of 16.
  for (const std::string& path : {test::moe_model(), test::kimi_linear_model()}) {
    CAPTURE(path);
    auto whole = load(path, 3, 2, 1024), chunked = load(path, 3, 2, 16);
    const GenerationRequest r = job(system_prompt("quarterly reports") + "Section 1: revenue grew.", 100);
    const Run a = run(*whole, {r}, false), b = run(*chunked, {r}, false), twins = run(*whole, {r, r}, true);
    CHECK(a.results[0].tokens == b.results[0].tokens);
    CHECK(twins.results[0].tokens == a.results[0].tokens);
    CHECK(twins.results[1].tokens == a.results[0].tokens);
    CHECK(twins.results[1].stats.prefix_tokens > 0);
  }
}

TEST_CASE("prefix sharing: a producer cancelled before the snapshot's end drops it; its waiter prefills alone") {
  // Chunks of 16: the first job's prefill is to stop at the common part and
  // snapshot it for the second, which waits; the first cancels after its
  // first chunk, so the second computes its whole prompt and gets its tokens.
  for (const std::string& path : {test::moe_model(), test::kimi_linear_model()}) {
    CAPTURE(path);
    auto m = load(path, 3, 2, 16);
    const std::string sys = system_prompt("quarterly reports");
    GenerationRequest producer = job(sys + "Section 1: revenue grew.", 100);
    producer.on_progress = [](const GenerationProgress& p) { return p.prefilled == 0; };
    const GenerationRequest waiter = job(sys + "Section 2: costs fell sharply.", 101);
    REQUIRE(shared_len(*m, producer.prompt, waiter.prompt) >= GenerationBatch::kPrefixMin);
    const Run alone = run(*m, {waiter}, false);
    GenerationBatch batch(*m);
    REQUIRE(batch.add(producer) == 0);
    REQUIRE(batch.add(waiter) == 1);
    CHECK(batch.prefix_entries() == 1);  // being produced
    std::map<int, GenerationResult> results;
    for (int steps = 0; results.size() < 2 && steps < 1000; ++steps) {  // a waiter left waiting would spin
      batch.step();
      for (auto& [h, r] : batch.take_finished()) results[h] = std::move(r);
    }
    REQUIRE(results.size() == 2);
    CHECK(results[0].finish_reason == "cancelled");
    CHECK(results[1].tokens == alone.results[0].tokens);
    CHECK(results[1].stats.prefix_tokens == 0);
    CHECK(batch.prefix_entries() == 0);
  }
}
