// plan_fit(): does a model fit this process's memory, and how, answered as
// data: the sequences decoded together, the KV pool they share, the tokens
// of a forward pass (the prefill chunk) and the memory plan's breakdown; or,
// when nothing fits, why, naming the smallest budget or setting that would.
// Model::load allocates what it returns, `model info` reports it, and the
// daemon learns from it how many jobs its batches hold (ModelSummary).
//
// Contract: pure (no allocation of the sizes it weighs, no clock, no /proc:
// the environment comes in FitInputs) and no exception for "does not fit".
// The choice, the first candidate that fits:
//   sequences: EngineOptions::max_sequences, then (with fewer_sequences, the daemon's
//   and `model info`'s) halved down to 1;
//   for each, the KV pool: kv_tokens when set, else n_seq x context halved
//   down to kMinPoolRows (a shorter pool serves the same jobs by their actual
//   lengths, docs/long-context.md, so it gives way before the batch does).
// A candidate fits when the memory plan (stream::fit_budget) holds it with
// at least two expert-cache slots, and, under an address-space limit
// (`ulimit -v`), its KV cache and buffers can be mapped; only the budget
// halves the pool (a pool the address space refuses ends the sequences' try).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/spec/hparams.h"
#include "engine/stream/budget_planner.h"
#include "engine/stream/memory_limit.h"

namespace ns {

struct ModelOptions;

// What plan_fit weighs: the file's header (hparams, tensors), what the
// architecture asks per token and per context, and the process around it.
struct FitInputs {
  std::string path;  // for messages
  const Hparams* hp = nullptr;
  BufferSizes buffers;  // Architecture::buffer_sizes()
  // ForwardState's buffers and the batch list for forward passes of `tokens` (Model::load's list of them).
  std::function<uint64_t(int64_t tokens)> activation_bytes;
  // Architecture::context_scratch(keys, queries, nullptr): scratch bytes that grow with the context.
  std::function<uint64_t(int64_t keys, int64_t queries)> context_scratch;
  std::span<const gguf::TensorInfo> resident;         // the ones the model reads, less the routed stacks
  stream::ExpertLayout layout;                        // the routed stacks (Model::routed_tensors())
  uint64_t overhead_bytes = 0;                        // the process before its buffers (RSS less repacked copies)
  uint64_t repacked_bytes = 0;                        // resident matrices held repacked (stream::BudgetInputs)
  uint64_t memory_budget = 0;                         // resolved: ModelOptions' or the machine's (never 0 here)
  std::string budget_source;                          // where a default budget came from; empty: set explicitly
  std::optional<stream::AddressSpace> address_space;  // RLIMIT_AS, when there is one and buffers will be mapped
};

struct FitPlan {
  bool fits = false;
  int64_t context = 0;                       // the longest sequence (EngineOptions::context resolved)
  int64_t sequences = 0;                     // decoded together: at most sequences_asked
  int64_t sequences_asked = 0;               // EngineOptions::max_sequences
  int64_t kv_tokens = 0;                     // the KV pool's rows all sequences share: at most sequences x context
  int64_t prefill_chunk = 0;                 // tokens per forward pass (ForwardState::max_batch): at least sequences
  uint64_t activation_bytes = 0;             // ForwardState's buffers and the batch list, for prefill_chunk tokens
  uint64_t context_scratch_bytes = 0;        // the scratch for the longest sequence this pool admits
  std::optional<stream::BudgetPlan> budget;  // the breakdown; none in io_mode mmap (nothing is planned)
  // Why the choice is smaller than asked, one line a step ("a KV pool of N tokens does not fit the memory
  // budget; trying M", "a batch of N sequences does not fit ..."); empty when the first candidate fit.
  std::vector<std::string> why;
  // The latest candidate's refusal: the memory plan's breakdown and the budget that would hold it, or the
  // address space it needs. !fits: why nothing fits (the smallest candidate's; the text of the
  // ns::Error(invalid_input) out of Model::load); fits with fewer sequences: why not one step more.
  std::string reason;
};

// Throws only what SequenceState refuses outright (a KV cache beyond any machine's memory, invalid_input).
FitPlan plan_fit(const FitInputs& in, const ModelOptions& opts);

// A load whose memory cannot be had: the model, the sizes that asked for it, `what` did not fit, and the fixes.
std::string does_not_fit(const std::string& path, int64_t n_ctx, int64_t n_seq, int64_t tokens,
                         const std::string& what);

// The prefill chunk for a budget: forward-pass buffers of `bytes_per_token`
// each take at most 1/20 of `memory_budget` (the rest goes to weights, KV
// cache and the expert cache), in multiples of 64 tokens within [64, 1024]. A
// long prompt goes through each layer in such chunks, and every expert is read
// once per chunk, so larger chunks read less per prompt token.
int64_t prefill_chunk_tokens(uint64_t memory_budget, uint64_t bytes_per_token);

// The smallest KV pool EngineOptions::kv_tokens 0 halves down to before
// fewer sequences (or the plan's refusal): below it a budget is better spent
// on a shorter `context` or a smaller `max_batch`, which the refusal names.
inline constexpr int64_t kMinPoolRows = 1024;

}  // namespace ns
