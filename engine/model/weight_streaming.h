// Weight streaming for a loaded model: the memory plan, the reader and the
// expert cache that moe_ffn takes routed experts from (engine/stream/).
//
// Contract:
// - setup_streaming() takes the memory plan plan_fit made (fit_plan.h: the
//   budget's breakdown, which fits) and, when io_mode is uring or pread and
//   the model has routed-expert stacks, opens a reader on the model's files
//   (every shard of a split set, file index i = shard i, as TensorInfo::file
//   counts) and an expert cache of plan.cache_experts slots.
//   io_mode and cache_policy arrive parsed (engine_options.h: the edges name a bad one).
// - io_queue_depth is reads in flight per device the model's files sit on: a
//   split model whose shards lie on k devices (GgufSet::n_devices) gets a
//   reader of k times that depth, so each disk is kept as busy as one alone.
// - repack_experts rewrites experts as they land into the kernels' interleaved
//   layout (kernels::repack_rows: Q4_0 -> Q4_0_R16, in place, the same bytes).
//   The repacked tiles give the file layout's kernel's bits on every path
//   (q4_0_r16_simd.h), so streamed experts still give the mapping's (io_mode
//   mmap) logits bit for bit (tests/unit/engine/weight_streaming_test.cpp);
//   the gain: docs/performance.md, "Interleaved Q4_0 rows".
// - preload_experts: when the plan's cache holds every routed expert, all are
//   read at load, in one pass in file order, as a mapped engine holds its
//   whole model from load: no decode step then waits for an expert's first
//   read (docs/performance.md, "One sequence in RAM: the profile against llama.cpp").
// - plan_only (`model info`, which reports the plan of a model it will not
//   run: a 48B plan's cache is gigabytes of slots): the plan, but no reader
//   and no expert cache; forward() then reads experts through the mapping.
// - memory_budget 0 means "what this process may use": the lower of its
//   cgroup memory limit and the machine's memory, minus headroom
//   (stream::default_memory_budget, memory_limit.h); the plan's first line
//   says which limit it came from.
// - In a streaming mode the expert stacks are never read through the mapping;
//   every shard's mapping is switched to MADV_RANDOM so faults on resident tensors do
//   not read ahead into them (peak RSS then stays within the plan).
// - io_mode mmap: no reader and no cache; experts are read through the
//   mapping (the page cache baseline) and the budget is not enforced.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/api/engine_options.h"
#include "engine/model/model_tuning.h"
#include "engine/state/forward_state.h"
#include "engine/gguf/gguf_set.h"
#include "engine/stream/budget_planner.h"
#include "engine/stream/expert_cache.h"
#include "engine/stream/expert_layout.h"
#include "engine/stream/reader.h"
#include "engine/stream/stream_stats.h"

namespace ns {

struct WeightStreaming {
  stream::ExpertLayout layout;
  stream::BudgetPlan plan;  // empty in mmap mode
  bool planned = false;
  std::unique_ptr<stream::Reader> reader;      // declared before cache: the cache must go first
  std::unique_ptr<stream::ExpertCache> cache;  // null: experts come from the mapping

  bool streaming() const { return cache != nullptr; }
  // Counters since load (zeros in mmap mode).
  stream::StreamStats stats() const;
};

// `routed`: the routed stacks the model reads (Model::routed_tensors(), the
// table's roles): the expert layout covers those only, so stacks a file
// carries but the model skips (NextN blocks) are neither streamed nor counted.
// `plan`: FitPlan::budget (none in io_mode mmap).
std::unique_ptr<WeightStreaming> setup_streaming(const gguf::GgufSet& f, std::span<const gguf::TensorInfo> routed,
                                                 const EngineOptions& opts, bool plan_only, const ModelTuning& tuning,
                                                 const std::optional<stream::BudgetPlan>& plan);

// Points s at the cache and, for prediction, at `routers`: one per block, the
// table's router role (TensorLoader::routers), rows == 0 for a dense block.
// s's MoE buffers must already be sized.
void attach_streaming(WeightStreaming& ws, std::span<const kernels::MatrixView> routers, const ModelTuning& tuning,
                      ForwardState& s);

// Bytes held by s's buffers (their capacity).
uint64_t forward_state_bytes(const ForwardState& s);

// This process's resident set now (VmRSS); 0 if unknown.
uint64_t current_rss_bytes();

}  // namespace ns
