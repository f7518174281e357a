// Weight streaming wired into the model: streamed experts (uring, pread) give
// bit-identical logits to the mapping (mmap) whatever the cache holds, the
// budget is planned and enforced, and peak RSS stays under it.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/model/model.h"
#include "engine/stream/budget_planner.h"
#include "common/error.h"
#include "tests/unit/error_message.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"

namespace ns {
namespace {

// 4 MoE layers of 16 experts (4 used): enough experts that a small cache evicts.
std::string streaming_model() {
  return test::make_model("stream-moe-q4",
                          "--arch llama --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 256 "
                          "--n-expert 16 --n-expert-used 4 --type Q4_0 --seed 11");
}

struct Run {
  std::vector<float> prompt_logits, decode_logits;
  stream::StreamStats stats;
};

// A 12-token prompt in one batch (all logits), then 6 greedy single-token steps.
Run run_model(const std::string& path, const std::string& io_mode, uint32_t max_cache_experts) {
  auto m = test::load_streamed(path, io_mode, max_cache_experts);
  std::vector<int32_t> toks;
  for (int i = 0; i < 12; ++i) toks.push_back((i * 37 + 5) % static_cast<int32_t>(m->n_vocab()));
  Run r;
  m->forward(toks, 0, true, r.prompt_logits);
  std::vector<float> last(r.prompt_logits.end() - m->n_vocab(), r.prompt_logits.end());
  for (int i = 0; i < 6; ++i) {
    const int32_t id = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    const int32_t one[1] = {id};
    m->forward(one, 12 + i, false, last);
    r.decode_logits.insert(r.decode_logits.end(), last.begin(), last.end());
  }
  r.stats = m->stream_stats();
  CHECK(m->streaming().streaming() == (io_mode != "mmap"));
  return r;
}

// Through a 4-slot cache read with each of `modes`: the mapping's logits, bit for bit, with evictions.
void check_4_slots_give_mapping(const std::string& path, std::initializer_list<const char*> modes = {"uring"}) {
  const Run base = run_model(path, "mmap", 0);
  for (const char* mode : modes) {
    CAPTURE(mode);
    const Run r = run_model(path, mode, 4);
    CHECK(r.prompt_logits == base.prompt_logits);
    CHECK(r.decode_logits == base.decode_logits);
    CHECK(r.stats.cache.evictions > 0);
  }
}

TEST_CASE("weight streaming: uring, pread and mmap give bit-identical logits") {
  const std::string path = streaming_model();
  const Run base = run_model(path, "mmap", 0);
  CHECK(base.stats.bytes_read() == 0);
  for (const char* mode : {"uring", "pread"}) {
    // 5 slots for 64 (layer, expert) pairs: experts are evicted and re-read,
    // and arrive in an order that has nothing to do with expert ids.
    for (uint32_t cap : {5u, 0u}) {
      CAPTURE(mode);
      CAPTURE(cap);
      const Run r = run_model(path, mode, cap);
      REQUIRE(r.prompt_logits.size() == base.prompt_logits.size());
      REQUIRE(r.decode_logits.size() == base.decode_logits.size());
      CHECK(r.prompt_logits == base.prompt_logits);
      CHECK(r.decode_logits == base.decode_logits);
      CHECK(r.stats.bytes_read() > 0);
      if (cap == 5) {
        CHECK(r.stats.cache.misses > 0);
        CHECK(r.stats.cache.evictions > 0);
        CHECK(r.stats.cache.prefetch_requested > 0);
      } else {  // the plan's cache holds all 64: read at load, no step missed one or predicted
        CHECK(r.stats.cache.misses == 0);
        CHECK(r.stats.cache.prefetch_requested == 0);
      }
    }
  }
}

// A cache that holds every expert (the whole model in the budget): once all
// are in, the next layer's router is no longer applied for a prefetch that
// would read nothing (ffn.cpp, next_router), and the logits stay the mapping's.
TEST_CASE("weight streaming: with every expert cached, no next-layer prediction, the mapping's logits") {
  const std::string path = streaming_model();
  const auto steps = [](Model& m, std::vector<float>& logits, int64_t from, int n) {
    std::vector<float> last;
    for (int i = 0; i < n; ++i) {
      const int32_t one[1] = {static_cast<int32_t>((i * 13 + 7) % m.n_vocab())};
      m.forward(one, from + i, false, last);
      logits.insert(logits.end(), last.begin(), last.end());
    }
  };
  auto mapped = test::load_streamed(path, "mmap", 0);
  // 4 layers x 16 experts: all of them, read as the prompt routes to them (no preload)
  auto streamed = test::load_streamed(path, "uring", 64, false);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 48; ++i) prompt.push_back((i * 37 + 5) % static_cast<int32_t>(streamed->n_vocab()));
  std::vector<float> a, b;
  mapped->forward(prompt, 0, false, a);
  streamed->forward(prompt, 0, false, b);
  const stream::CacheStats warm = streamed->stream_stats().cache;
  REQUIRE(warm.misses + warm.prefetch_reads == 64);  // every expert read once: all resident
  a.clear();
  b.clear();
  steps(*mapped, a, 48, 4);
  steps(*streamed, b, 48, 4);
  const stream::CacheStats after = streamed->stream_stats().cache;
  CHECK(after.prefetch_requested == warm.prefetch_requested);
  CHECK(after.misses == warm.misses);
  CHECK(b == a);
}

// A cache that holds every expert reads them all at load (EngineOptions::
// preload_experts): no step misses, none predicts, and the logits are the
// mapping's, through uring and pread; a smaller cache reads nothing at load.
TEST_CASE("weight streaming: a cache that holds every expert reads them all at load; no step then misses") {
  const std::string path = streaming_model();
  const Run base = run_model(path, "mmap", 0);
  for (const char* mode : {"uring", "pread"}) {
    CAPTURE(mode);
    auto m = test::load_streamed(path, mode, 64);
    const stream::StreamStats loaded = m->stream_stats();
    CHECK(loaded.cache.misses == 0);
    CHECK(loaded.cache.prefetch_reads == 0);
    CHECK(m->streaming().cache->holds_every_expert());
    CHECK(loaded.cache.bytes_requested == m->streaming().layout.total_bytes());  // every expert once
    const Run r = run_model(path, mode, 64);
    CHECK(r.prompt_logits == base.prompt_logits);
    CHECK(r.decode_logits == base.decode_logits);
    CHECK(r.stats.cache.misses == 0);
    CHECK(r.stats.cache.prefetch_requested == 0);
    CHECK(r.stats.cache.bytes_requested == loaded.cache.bytes_requested);  // nothing read after load
  }
  auto small = test::load_streamed(path, "uring", 63);  // one slot short: nothing read at load
  CHECK(small->stream_stats().cache.bytes_requested == 0);
}

// kimi-linear's routed experts (MXFP4) stream like any others, between KDA and MLA layers.
TEST_CASE("weight streaming: kimi-linear streamed through a 4-slot cache gives the mapping's logits") {
  check_4_slots_give_mapping(test::kimi_linear_model());
}

// qwen3next / qwen35moe: experts stream between Gated DeltaNet and gated attention layers.
TEST_CASE("weight streaming: qwen3next and qwen35moe streamed through a 4-slot cache give the mapping's logits") {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    CAPTURE(arch);
    check_4_slots_give_mapping(test::qwen_next_model(arch));
  }
}

// deepseek2 quantized as the 1.8-bit K2 files are (IQ1_S gate/up, IQ2_XXS down, Q4_K/Q6_K attention): its
// 24 low-bit experts stream through 4 slots between MLA layers, evicted and re-read, with the mapping's logits.
TEST_CASE("weight streaming: a K2-like IQ1_S/IQ2_XXS deepseek2 through a 4-slot cache gives the mapping's logits") {
  check_4_slots_give_mapping(test::k2_lowbit_model(), {"uring", "pread"});
}

// The byte counts of an i-quant mix (#16: a row's size is what the reader reads): the reader, the planner and
// `model info` count ggml's block sizes, IQ1_S 50 bytes per 256 weights and IQ2_XXS 66, so one expert of the
// K2-like mix (gate and up 256 rows of 256 IQ1_S weights, down 256 rows of 256 IQ2_XXS) is 42496 bytes.
TEST_CASE("weight streaming: the K2-like i-quant mix's expert bytes, as the reader, the planner and model info count") {
  const std::string path = test::k2_lowbit_model();
  constexpr uint64_t kExpert = 2 * 256 * 50 + 256 * 66;
  // The routed stacks and the resident rest, as the table's roles split them (mmap: nothing planned here).
  const auto m = Model::load(path, ModelOptions{.engine = {.context = 64, .io_mode = IoMode::mmap}});
  int stacks = 0;
  for (const gguf::TensorInfo& t : m->routed_tensors()) {
    CAPTURE(t.name);
    CHECK(t.nbytes == 8 * 256 * (t.type == gguf::GgmlType::IQ1_S ? 50u : 66u));
    ++stacks;
  }
  CHECK(stacks == 9);
  const auto layout = stream::ExpertLayout::from_tensors(m->routed_tensors(), path);
  stream::BudgetInputs in;
  in.memory_budget = 1ull << 30;
  const stream::BudgetPlan plan = stream::plan_budget(m->resident_tensors(), layout, in, path);
  CHECK(plan.streamed_experts == 24);
  CHECK(plan.streamed_bytes == 24 * kExpert);
  const auto info = test::run_cli_json("model info " + path + " --json");
  if (info.is_null()) {
    MESSAGE("skipped model info: build the nightshift target first");
    return;
  }
  CHECK(info.at("bytes_per_expert").get<uint64_t>() == kExpert);
  CHECK(info.at("tensor_types").at("IQ1_S").get<int>() == 6);
  CHECK(info.at("tensor_types").at("IQ2_XXS").get<int>() == 3);
  CHECK(info.at("resident_bytes").get<uint64_t>() + 24 * kExpert <= info.at("file_bytes").get<uint64_t>());
}

// A qwen3next file larger than the budget (53 MiB against 40 MiB: 4 layers of 32 Q8_0 experts) runs in a fresh
// process, its experts streamed and re-read, the delta-net state and attention cache resident, within the budget.
TEST_CASE("weight streaming: qwen3next runs within a memory_budget smaller than its file") {
  const std::string path = test::make_model("stream-qwen3next-q8",
                                            "--arch qwen3next --n-embd 256 --n-layer 4 --n-head 4 "
                                            "--n-head-kv 2 --n-ff 512 --n-expert 32 --n-expert-used 4 "
                                            "--full-attn-every 2 --qn-head-dim 64 --qn-rope-dim 16 "
                                            "--gdn-head-dim 32 --gdn-k-heads 2 --gdn-v-heads 4 "
                                            "--type Q8_0 --seed 5");
  test::check_runs_under_budget("qwen3next", path, 40, 1, "uring", 12);
}

TEST_CASE("weight streaming: a budget too small fails with the breakdown and the minimum") {
  ModelOptions mo{.engine = {.context = 64, .memory_budget = 1 << 20}};
  const std::string msg = test::expect_error(
      ErrorKind::invalid_input, [&] { Model::load(streaming_model(), mo); }, "a 1 MiB budget was accepted");
  CHECK(test::contains(msg, "too small"));
  CHECK(test::contains(msg, "Set memory_budget to at least"));
  // An io_mode is parsed where it is given, once (engine_options.h): a bad name never reaches a load.
  CHECK_THROWS_WITH_AS(mo.engine.io_mode = "disk", "io_mode 'disk' is not one of: uring, pread, mmap", Error);
}

// The real CLI in a fresh process (VmHWM is per process): a model about twice
// the budget runs, and the peak RSS it reports stays within the budget.
TEST_CASE("weight streaming: peak RSS stays within memory_budget for a model larger than it") {
  // ~230 MB: 8 layers of 32 experts at Q4_0.
  const std::string path = test::make_model("stream-rss-q4",
                                            "--arch llama --n-embd 512 --n-layer 8 --n-head 8 "
                                            "--n-head-kv 2 --n-ff 1024 --n-expert 32 --n-expert-used 4 "
                                            "--type Q4_0 --seed 7");
  test::check_runs_under_budget("llama", path, 120, 1.8, "uring", 12);
}

}  // namespace
}  // namespace ns
