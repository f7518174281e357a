// Switches only tests and benchmarks set: no config key, no flag, not in
// EngineOptions (the options users see, engine/api/engine_options.h). Their
// defaults are what every user runs; a test turns one to measure or to reach
// a path (a small cache, no prediction, the expanded MLA prefill).
#pragma once

#include <cstdint>

namespace ns {

struct ModelTuning {
  // Prefetch the next layer's experts from the current hidden state (in a streaming io_mode).
  bool predict_experts = true;
  // Experts prefetched per token: its best predicted ones for the next
  // layer; 0 = as many as it uses. A wrong guess costs a whole expert read,
  // and the first two guesses are right most often (docs/performance.md,
  // "Expert prefetch width").
  uint32_t prefetch_per_token = 2;
  uint32_t max_cache_experts = 0;   // 0: as many as the plan allows; else at most this many
  bool mla_expand_prefill = false;  // ArchOptions::mla_expand_prefill (engine/arch/architecture.h)
};

}  // namespace ns
