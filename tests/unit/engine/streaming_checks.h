// The checks every streaming architecture's tests make (llama, qwen3next,
// glm4moe, gpt-oss, kimi-k3, ...), written once:
// - load_streamed(): the model on 2 threads, a context of 64, its routed
//   experts read through io_mode into a cache of `cache_experts` slots (0:
//   the plan's; a cache that holds every expert reads them all at load unless
//   preload is false).
// - streamed_logits(): a prompt and four single-token steps with the routed
//   experts read through io_mode and a cache of a few slots (evictions and
//   re-reads), returning the logits and the stream stats; "mmap" gives the
//   mapping's logits to compare against, bit for bit.
// - check_streamed_equals_mapped(): those logits through pread equal the
//   mapping's, bit for bit, and bytes were read.
// - check_streams_within_budget(): the real CLI in a fresh process (VmHWM is
//   per process) on a file larger than the budget: every token generated,
//   peak RSS within the budget, experts read and some read more than once.
//   Under ASan the budget gets kAsanRssMiB on top (asan_budget.h).
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model.h"
#include "tests/unit/engine/asan_budget.h"
#include "tests/unit/engine/test_models.h"

namespace ns::test {

inline std::unique_ptr<Model> load_streamed(const std::string& path, const std::string& io_mode, uint32_t cache_experts,
                                            bool preload = true) {
  return Model::load(path, {.engine = {.threads = 2, .context = 64, .io_mode = io_mode, .preload_experts = preload},
                            .tuning = {.max_cache_experts = cache_experts}});
}

inline std::pair<std::vector<float>, stream::StreamStats> streamed_logits(const std::string& path,
                                                                          const std::string& io_mode, int prompt_tokens,
                                                                          int cache_experts = 3) {
  auto m = load_streamed(path, io_mode, static_cast<uint32_t>(cache_experts));
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_tokens; ++i) prompt.push_back((i * 37 + 5) % static_cast<int32_t>(m->n_vocab()));
  std::vector<float> all, last;
  m->forward(prompt, 0, true, all);
  for (int i = 0; i < 4; ++i) {
    const int32_t one[1] = {static_cast<int32_t>(i * 11 + 3)};
    m->forward(one, prompt_tokens + i, false, last);
    all.insert(all.end(), last.begin(), last.end());
  }
  return {all, m->stream_stats()};
}

inline void check_streamed_equals_mapped(const std::string& path, int prompt_tokens) {
  const auto mapped = streamed_logits(path, "mmap", prompt_tokens);
  const auto streamed = streamed_logits(path, "pread", prompt_tokens);
  CHECK(streamed.first == mapped.first);
  CHECK(streamed.second.bytes_read() > 0);
}

inline void check_streams_within_budget(const std::string& path, int budget_mib, const std::string& io_mode,
                                        int n_tokens) {
  budget_mib += kAsanRssMiB;
  const auto st = run_cli_stats("-m " + path + " --memory-budget " + std::to_string(budget_mib) + "MiB --io-mode " +
                                io_mode + " --threads 2 --context 128 --temperature 0 -n " + std::to_string(n_tokens));
  if (st.is_null()) {
    MESSAGE("skipped: build the nightshift target first");
    return;
  }
  CAPTURE(st.dump());
  CHECK(st.at("completion_tokens").get<int>() == n_tokens);
  CHECK(st.at("peak_rss_bytes").get<uint64_t>() > 0);
  CHECK(st.at("peak_rss_bytes").get<uint64_t>() <= (static_cast<uint64_t>(budget_mib) << 20));
  CHECK(st.at("bytes_read").get<uint64_t>() > 0);
  CHECK(st.at("cache_hit_rate").get<double>() < 1.0);
}

}  // namespace ns::test
