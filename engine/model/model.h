// A loaded model: its file, hyperparameters, tokenizer, weights (through its
// architecture), KV cache and forward-pass buffers. forward() appends tokens
// to the KV cache and returns their logits.
//
// Not thread-safe: one forward at a time. Resident weights are read from the
// mapped file (with EngineOptions::repack_experts, the Q4_0 projections
// from owned copies in Q4_0_R16: TensorLoader::set_repack); routed experts
// too in io_mode mmap, else from the expert cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/api/engine_options.h"
#include "engine/arch/architecture.h"
#include "engine/state/forward_state.h"
#include "engine/model/fit_plan.h"
#include "engine/gguf/gguf_set.h"
#include "engine/state/sequence_state.h"
#include "engine/state/trace.h"
#include "engine/spec/hparams.h"
#include "engine/spec/routing.h"
#include "engine/model/model_tuning.h"
#include "engine/model/weight_streaming.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/thread_pool.h"

namespace ns {

// How a model is loaded. `engine` is the user's settings whole, as the option
// table declares them (engine/api/engine_options.h: their meaning, defaults
// and ranges); Engine::load passes its EngineOptions through unchanged, and
// Model::load reads each where it is used (max_sequences is the sequences
// the KV cache holds at once; max_batch_tokens the tokens per forward call,
// never below them; fewer_sequences and kv_tokens as plan_fit reads them,
// fit_plan.h; prefix_cache the spare sequences of GenerationBatch's prefix
// cache). The other two are never a user's: plan_only is `model info`'s,
// tuning the tests' and benches' (model_tuning.h).
struct ModelOptions {
  EngineOptions engine;
  // Make the plan, open no reader and allocate no expert cache, KV pool or
  // scratch (weight_streaming.h): for a report of a model nothing will run on.
  bool plan_only = false;
  ModelTuning tuning;
};

// One token of a batch: its id, the KV-cache sequence it belongs to, its
// position there, and whether its logits are wanted.
struct BatchToken {
  int32_t token = 0;
  int32_t seq = 0;
  int32_t pos = 0;
  bool logits = false;
};

class Model {
 public:
  // `path`: a GGUF file, or any shard of a split set (gguf::GgufSet::open
  // finds and checks the others). Sized once by plan_fit (fit_plan.h): a
  // plan that fits nothing is ns::Error(invalid_input) with its reason.
  static std::unique_ptr<Model> load(const std::string& path, const ModelOptions& opts);

  const Hparams& hparams() const { return hp_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The model's files: one, or a split set's shards (metadata() holds every key).
  const gguf::GgufSet& files() const { return *files_; }
  int64_t n_ctx() const { return seqs_->n_ctx(); }
  int64_t n_vocab() const { return hp_.n_vocab; }
  int64_t max_batch_tokens() const { return state_.max_batch; }  // tokens per forward pass
  const SequenceState& sequence_state() const { return *seqs_; }
  // What plan_fit chose at load (sequences, KV pool, prefill chunk) and why.
  const FitPlan& fit() const { return fit_; }
  uint64_t n_params() const { return n_params_; }  // of tensors()
  // The tensors the architecture runs on (TensorLoader::used_tensors): the
  // file's, less the skipped NextN blocks and anything else it does not read.
  const std::vector<gguf::TensorInfo>& tensors() const { return tensors_; }
  // tensors() split by the role the architecture's table gives each
  // (engine/spec/tensor_role.h), each in file order: the routed experts'
  // stacks, which are streamed, and the resident rest.
  const std::vector<gguf::TensorInfo>& routed_tensors() const { return routed_; }
  const std::vector<gguf::TensorInfo>& resident_tensors() const { return resident_; }
  // Weight streaming: the memory plan (planned false in mmap mode) and the
  // reader / expert-cache counters since load (zeros when not streaming).
  const WeightStreaming& streaming() const { return *streaming_; }
  stream::StreamStats stream_stats() const { return streaming_->stats(); }
  // Resident matrices held repacked in owned copies (TensorLoader::set_repack;
  // counted only, not copied, with plan_only): how many, and their bytes.
  size_t repacked_tensors() const { return repacked_tensors_; }
  uint64_t repacked_bytes() const { return repacked_bytes_; }

  // Runs tokens at positions [pos0, pos0 + n) (n <= max_batch_tokens(), pos0 + n <= n_ctx()).
  // logits receives [n][n_vocab] when all_logits, else [1][n_vocab] for the last token.
  // Sequence 0 only: a convenience over forward_batch().
  void forward(std::span<const int32_t> tokens, int64_t pos0, bool all_logits, std::vector<float>& logits);
  // Any mix of sequences and positions (tokens of one sequence in position order;
  // every earlier position of a sequence already in the cache or in this batch).
  // logits receives one [n_vocab] row per token with .logits set, in batch order.
  // Each token's result is independent of what else is in the batch.
  void forward_batch(std::span<const BatchToken> batch, std::vector<float>& logits);
  int64_t n_seq() const { return seqs_->n_seq(); }
  // Spare sequences for prefix snapshots, ids n_seq() .. n_seq() + prefix_slots() - 1
  // (EngineOptions::prefix_cache): never in a forward pass, only copied from and to.
  int64_t prefix_slots() const { return seqs_->n_spare(); }
  // Sequence dst starts as a copy of src's first n_tokens positions (attention
  // rows and recurrent state; SequenceState::copy_sequence).
  void copy_sequence(int32_t src, int32_t dst, int64_t n_tokens) { seqs_->copy_sequence(src, dst, n_tokens); }
  // KV rows of the pool for sequence seq (SequenceState::reserve / release).
  bool reserve_rows(int32_t seq, int64_t n) { return seqs_->reserve(seq, n); }
  void release_rows(int32_t seq) { seqs_->release(seq); }

  // Routing: fn (empty: none) is called once per MoE layer of every forward
  // pass with the experts chosen for each token (spec/routing.h).
  void set_routing_observer(RoutingObserver fn) { routing_observer_ = std::move(fn); }
  // Intermediates: fn (empty: none) is called with each named intermediate the
  // architecture traces (state/trace.h; for comparing roundings with the reference).
  void set_trace_observer(TraceObserver fn) { trace_observer_ = std::move(fn); }
  // Distinct (layer, expert) pairs routed to, summed over every forward pass since load.
  uint64_t experts_routed() const { return state_.experts_routed; }
  // The forward-pass buffers (forward_state.h); with the batch list, the
  // memory plan's activations (forward_state_bytes + batch_list_bytes).
  const ForwardState& forward_state() const { return state_; }
  uint64_t batch_list_bytes() const { return single_.capacity() * sizeof(BatchToken); }
  // The compute threads: their number, spin and counters (parallel calls, wakes; thread_pool.h).
  const ThreadPool& pool() const { return *pool_; }

 private:
  Model() = default;
  std::shared_ptr<gguf::GgufSet> files_;
  Hparams hp_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_weights_;  // repacked resident matrices (arch_'s views): before arch_
  std::unique_ptr<Architecture> arch_;
  kernels::MatrixView token_embd_, output_;
  std::vector<float> output_norm_;
  std::unique_ptr<WeightStreaming> streaming_;  // state_ points into it: declared before, destroyed after
  std::unique_ptr<SequenceState> seqs_;
  FitPlan fit_;
  std::unique_ptr<ThreadPool> pool_;
  ForwardState state_;
  std::vector<BatchToken> single_;    // forward()'s batch, reused
  RoutingObserver routing_observer_;  // state_.routing_observer points here
  TraceObserver trace_observer_;      // state_.trace_observer points here
  uint64_t n_params_ = 0;
  size_t repacked_tensors_ = 0;
  uint64_t repacked_bytes_ = 0;
  std::vector<gguf::TensorInfo> tensors_, routed_, resident_;
};

}  // namespace ns
