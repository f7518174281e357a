// A loaded model: its file, hyperparameters, tokenizer, weights (through its
// architecture), KV cache and forward-pass buffers. forward() appends tokens
// to the KV cache and returns their logits.
//
// Not thread-safe: one forward at a time. Resident weights are read from the
// mapped file (with StreamingOptions::repack_experts, the Q4_0 projections
// from owned copies in Q4_0_R16: TensorLoader::set_repack); routed experts
// too in io_mode mmap, else from the expert cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/state/forward_state.h"
#include "engine/model/fit_plan.h"
#include "engine/gguf/gguf_set.h"
#include "engine/state/sequence_state.h"
#include "engine/state/trace.h"
#include "engine/spec/hparams.h"
#include "engine/spec/routing.h"
#include "engine/model/weight_streaming.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/thread_pool.h"

namespace ns {

struct ModelOptions {
  int threads = 0;        // 0 = all cores
  int thread_spin_us = ThreadPool::kDefaultSpinUs;  // a pool wait's spin before blocking (thread_pool.h); 0 = never
  int64_t context = 0;    // the longest sequence, in tokens; 0 = n_ctx_train (the model's own length)
  // Tokens per forward call (a prefill chunk, or one token of many sequences).
  // 0: sized from the memory budget (prefill_chunk_tokens()). Never below
  // n_seq: a decode step takes one token of every sequence.
  int64_t max_batch_tokens = 0;
  int64_t n_seq = 1;        // sequences the KV cache holds at once (jobs decoded together)
  // Fewer sequences than n_seq when the memory plan holds no more (plan_fit,
  // fit_plan.h): the daemon's and `model info`'s; off, such a load fails.
  bool fewer_sequences = false;
  // Tokens of KV cache all sequences share (the full-attention layers' pool,
  // sequence_state.h). 0: n_seq x context, or the largest pool the memory
  // plan holds (plan_fit, never below kMinPoolRows); > 0: this many (at most n_seq x context).
  int64_t kv_tokens = 0;
  // Prompt-prefix snapshots kept beside the n_seq sequences (GenerationBatch's
  // prefix cache): spare sequences of the state (sequence_state.h) whose
  // rows come from the KV pool and whose sliding rings and recurrent state
  // the memory plan counts. 0: none, prefix sharing off.
  int64_t prefix_cache = 0;
  // memory_budget, io_mode, cache policy (weight_streaming.h), and the switches only tests and benches set.
  StreamingOptions streaming;
  ArchOptions arch;            // choices the file leaves open (engine/arch/architecture.h)
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
  // (ModelOptions::prefix_cache): never in a forward pass, only copied from and to.
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
  std::vector<BatchToken> single_;  // forward()'s batch, reused
  RoutingObserver routing_observer_;  // state_.routing_observer points here
  TraceObserver trace_observer_;      // state_.trace_observer points here
  uint64_t n_params_ = 0;
  size_t repacked_tensors_ = 0;
  uint64_t repacked_bytes_ = 0;
  std::vector<gguf::TensorInfo> tensors_, routed_, resident_;
};

}  // namespace ns
