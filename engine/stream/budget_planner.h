// The memory plan: how `memory_budget` splits into resident weights, KV
// cache, activations, I/O buffers, the process's own overhead, and the expert
// cache, which gets what is left.
//
// Resident: every tensor the model reads but the routed-expert stacks (the
// caller's split by the tensor table's roles, expert_layout.h), counted by the
// 4 KiB pages it spans (what touching it through a mapping costs). Streamed:
// the stacks the layout holds, one cache slot per expert.
//
// fit_budget() answers as data: a budget that cannot hold the fixed parts
// plus min_cache_experts slots gives a plan whose `refusal` shows the
// breakdown and the smallest budget that would work (the memory plan's
// search, engine/model/fit_plan.h, weighs candidates with it); plan_budget()
// throws that refusal as ns::Error(invalid_input).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/stream/expert_layout.h"

namespace ns::stream {

struct BudgetInputs {
  uint64_t memory_budget = 0;
  std::string budget_source;      // where a default budget came from (memory_limit.h); empty: set explicitly
  uint64_t kv_cache_bytes = 0;    // context × batch × per-token bytes, computed by the engine
  uint64_t recurrent_bytes = 0;   // batch × per-sequence state of linear-attention (KDA) layers
  std::string kv_cache_note;      // what bounds the KV cache beyond context × batch (sliding-window layers), or empty
  uint64_t activation_bytes = 0;  // forward-pass buffers for the largest batch
  uint64_t io_buffer_bytes = 0;   // read staging outside the cache (experts read straight into slots)
  uint64_t overhead_bytes = 0;    // the process itself: code, libraries, tokenizer, heap
  // Of the resident weights, those held in owned repacked copies instead of
  // the mapping's pages (TensorLoader::set_repack): counted in resident_bytes
  // like the rest (a copy takes no more than the pages it replaces), named.
  uint64_t repacked_bytes = 0;
  uint32_t min_cache_experts = 2;  // fewest slots that still overlap reading with compute
};

struct BudgetPlan {
  std::string model;
  uint64_t memory_budget = 0;
  std::string budget_source;  // BudgetInputs::budget_source
  uint64_t resident_bytes = 0;
  uint32_t resident_tensors = 0;
  uint64_t repacked_bytes = 0;  // BudgetInputs::repacked_bytes (part of resident_bytes)
  uint64_t streamed_bytes = 0;
  uint32_t streamed_tensors = 0;
  uint64_t streamed_experts = 0;  // (layer, expert) pairs in the model
  uint64_t kv_cache_bytes = 0, recurrent_bytes = 0, activation_bytes = 0, io_buffer_bytes = 0, overhead_bytes = 0;
  std::string kv_cache_note;    // BudgetInputs::kv_cache_note
  uint64_t slot_bytes = 0;      // one cache slot (an expert with O_DIRECT slack)
  uint32_t cache_experts = 0;   // the expert cache's capacity
  uint64_t cache_bytes = 0;     // cache_experts × slot_bytes
  uint64_t minimum_budget = 0;  // fixed parts + min_cache_experts slots
  // Empty when memory_budget holds minimum_budget; else why not: the breakdown with the fewest slots and the
  // budget to set (whole MiB).
  std::string refusal;

  uint64_t fixed_bytes() const {
    return resident_bytes + kv_cache_bytes + recurrent_bytes + activation_bytes + io_buffer_bytes + overhead_bytes;
  }
  uint64_t planned_bytes() const { return fixed_bytes() + cache_bytes; }
  bool all_experts_fit() const { return cache_experts >= streamed_experts; }
  // One line per part, for the log (and, with the verdict, for the error).
  std::string describe() const;
};

// How fast a plan can go when the disk is the limit: the honest answer to
// "how fast can this model run here". Assumes routing spread evenly over the
// experts (trained MoE models are balanced for it) and a cache that holds a
// fixed share of them (hit rate = cached / all experts), and counts only the
// routed experts' bytes: compute, and the resident weights already in memory,
// are not in it, so these are upper bounds on tokens per second.
struct DiskBoundEstimate {
  double hit_rate = 0;          // cache_experts / streamed_experts
  double bytes_per_expert = 0;  // streamed bytes / streamed experts
  // One sequence: n_moe_layers x n_used experts a token, the misses read.
  double bytes_per_token_batch1 = 0;
  double tok_s_batch1 = 0;
  // The batch whose step touches 99 % of every layer's experts (uniform
  // routing: 1 - (1 - n_used/n_expert)^B >= 0.99): each step reads every
  // uncached expert once for all its tokens.
  int64_t full_batch = 0;
  double bytes_per_token_full = 0;
  double tok_s_full = 0;
};
DiskBoundEstimate estimate_disk_bound(const BudgetPlan& plan, int64_t n_moe_layers, int64_t n_expert, int64_t n_used,
                                      double disk_bytes_per_s);

// The trade-off between batch and context within a plan's budget: for each
// context, how many sequences of that full length fit when the KV cache takes
// everything but the plan's other fixed parts and its fewest expert-cache
// slots (a pool of kv_tokens = max_batch x context tokens, which the daemon
// shares among jobs by their actual lengths: docs/long-context.md). Each
// sequence costs context x kv_bytes_per_token + per_sequence_bytes (sliding
// rings, recurrent state). Activations are the plan's, as sized for its batch.
struct KvTradeoff {
  int64_t context = 0;
  int64_t max_batch = 0;  // 0: not even one such sequence fits
  int64_t kv_tokens = 0;  // max_batch x context
};
std::vector<KvTradeoff> kv_tradeoff(const BudgetPlan& plan, uint64_t kv_bytes_per_token, uint64_t per_sequence_bytes,
                                    const std::vector<int64_t>& contexts, uint32_t min_cache_experts = 2);
// "64 x 4K, 16 x 16K, 4 x 128K": the pairs that fit, for the plan's text.
std::string describe_tradeoff(const std::vector<KvTradeoff>& t);

// `resident`: the tensors the model reads less the routed stacks, which are `layout`'s.
BudgetPlan fit_budget(std::span<const gguf::TensorInfo> resident, const ExpertLayout& layout, const BudgetInputs& in,
                      const std::string& model_name);
// fit_budget(), its refusal thrown as ns::Error(invalid_input).
BudgetPlan plan_budget(std::span<const gguf::TensorInfo> resident, const ExpertLayout& layout, const BudgetInputs& in,
                       const std::string& model_name);

}  // namespace ns::stream
