// What `nightshift model info` shows of a GGUF model, computed by loading it
// without its weights (io_mode mmap, or the plan only under a budget):
// architecture, parameters (total and active per token), quant mix, bytes per
// expert, the sequence state per token, and with a memory budget the memory
// plan the daemon would run under, its batch x context trade-off and the
// disk-bound estimate. Part of the engine facade (engine.h).
//
// Contract: describe_model() throws ns::Error as Engine::load does (bad_model,
// io, invalid_input for a budget that cannot hold even one sequence).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/api/engine_options.h"

namespace ns {

struct ModelReportOptions {
  // The options the plan weighs, as the daemon's (the option table's rows:
  // context, max_batch, prefix_cache, memory_budget; the plan holds fewer
  // sequences than max_batch when the budget holds no more, as the daemon's
  // does). The others do not change the report.
  EngineOptions engine;
  bool plan = false;            // make the memory plan for engine.memory_budget; false: the weights are mapped
  double disk_bytes_per_s = 0;  // the disk-bound estimate's read rate; 0 = unknown
};

// The memory plan for ModelReportOptions::engine.memory_budget (engine/stream/budget_planner.h).
struct MemoryPlanReport {
  uint64_t memory_budget = 0;
  int64_t context = 0, kv_tokens = 0;
  int max_batch = 0, max_batch_asked = 0;  // what fits (plan_fit: at most what was asked)
  std::vector<std::string> fit_steps;      // why less than asked, a step a line (FitPlan::why)
  int prefix_cache = 0;                    // prompt-prefix snapshots planned
  uint64_t resident_bytes = 0, kv_cache_bytes = 0, recurrent_bytes = 0, minimum_budget = 0;
  uint64_t cache_experts = 0, streamed_experts = 0;
  struct Pair {
    int64_t context = 0, max_batch = 0, kv_tokens = 0;
  };
  std::vector<Pair> batch_x_context;  // contexts of 4K, 8K, ... up to the model's own length
  std::string description;            // the plan's breakdown, one part a line
  std::string batch_x_context_text;   // "64 x 4K, 16 x 16K, ..."
};

// Tokens per second a disk of a given rate allows at most (routing spread evenly).
struct DiskBoundReport {
  double hit_rate = 0;
  double bytes_per_token_batch1 = 0, tok_s_batch1 = 0;
  int64_t full_batch = 0;
  double bytes_per_token_full = 0, tok_s_full = 0;
};

// One file of the model: the only one, or a shard of a split set (gguf_set.h).
struct ShardReport {
  std::string path;           // as the set names it (beside the path given)
  std::string resolved_path;  // symlinks resolved
  uint64_t bytes = 0;
  uint32_t device_major = 0, device_minor = 0;  // st_dev of the resolved file: which disk serves its reads
};

struct ModelReport {
  std::string name, architecture, tokenizer, pre_tokenizer;
  uint32_t gguf_version = 0;
  uint64_t file_bytes = 0;          // every shard's together
  std::vector<ShardReport> shards;  // the model's files in order: one, or a split set's shards
  uint64_t parameters = 0, active_parameters_per_token = 0;
  uint64_t tensors = 0, tensors_not_loaded = 0;  // loaded; in the file but skipped (NextN blocks)
  std::map<std::string, int64_t> tensor_types;   // type name -> tensors of that type
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_expert = 0, n_expert_used = 0;
  int64_t context_length = 0;     // the model's own (n_ctx_train)
  uint64_t bytes_per_expert = 0;  // one routed expert of the first MoE layer
  uint64_t resident_bytes = 0;    // every tensor but the routed-expert stacks
  uint64_t kv_bytes_per_token = 0, recurrent_bytes_per_sequence = 0;
  std::optional<MemoryPlanReport> memory_plan;  // with a memory budget
  std::optional<DiskBoundReport> disk_bound;    // with a memory plan of a MoE model
};

ModelReport describe_model(const std::string& gguf_path, const ModelReportOptions& opts);

}  // namespace ns
