// Continuous batching: several generations advance together, one forward pass
// per step over the next token of every decoding sequence and prompt chunks
// of the ones still prefilling, so every weight - each routed expert above all
// - is read once per step for all of them. Requests join and leave at any
// step. The design (choices, grammars, logprobs, KV rows, prefix sharing,
// per-request stats) is in docs/architecture.md, "The batch step loop".
//
// Contract: a request's tokens, logprobs and finish reason are those it gets
// alone (and with prefix sharing off), whatever joins or leaves beside it.
// add() throws ns::Error(invalid_input) for a bad request and leaves the batch
// unchanged; it returns kNoRoom, also unchanged, when the KV pool lacks the
// rows now (offer it again when largest_free_rows() >= refused_rows()).
// Not thread-safe. At most model.n_seq() sequences are active at once (a
// request of n choices takes n); the model's spare sequences hold the prefix
// snapshots (prefix_cache.h), each sequence is a BatchSequence
// (batch_sequence.h), its stats are kept by request_accounting.h.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/api/batch_stats.h"
#include "engine/api/generation.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/model/model.h"
#include "engine/batch/prefix_cache.h"

namespace ns {

struct BatchSequence;
struct RequestShare;

class GenerationBatch {
 public:
  explicit GenerationBatch(Model& model);
  ~GenerationBatch();

  // Tokenizes and validates; throws ns::Error(invalid_input) for a bad request
  // (the batch is unchanged), among them params.n above the slots the model
  // has. Returns the request's handle, or kNoRoom when the KV pool lacks the
  // rows now. Requires free_slots() >= params.n.
  static constexpr int kNoRoom = kBatchNoRoom;
  int add(GenerationRequest request);
  // KV rows: the longest free range now, and what the last kNoRoom wanted per choice.
  int64_t largest_free_rows() const;
  int64_t refused_rows() const { return refused_rows_; }
  int free_slots() const;
  int active() const;

  // One forward pass over all active requests. Returns false when none is active.
  bool step();
  // Requests that finished since the last call, with their handles.
  std::vector<std::pair<int, GenerationResult>> take_finished();

  // Runs requests to completion, up to n_seq at a time, results in request
  // order; totals (optional) receives the run's totals().
  static std::vector<GenerationResult> run_all(Model& model, std::vector<GenerationRequest> requests,
                                               bool prefix_sharing = true, BatchRunStats* totals = nullptr);

  // The figures of the latest step() that ran a forward pass (zeros before the first).
  const BatchStepStats& last_step() const { return last_step_; }
  // Sum of every step since construction or reset_totals().
  const BatchRunStats& totals() const { return totals_; }
  void reset_totals() { totals_ = {}; }
  // Prefix sharing: on by default when the model has prefix slots; off, every
  // request prefills its whole prompt (for comparison).
  static constexpr int64_t kPrefixBlock = PrefixCache::kBlock;
  static constexpr int64_t kPrefixMin = PrefixCache::kMin;
  void set_prefix_sharing(bool on) { sharing_ = on; }
  bool prefix_sharing() const { return sharing_ && prefixes_.available(); }
  // Snapshots kept now (ready or being produced), for tests and logs.
  int prefix_entries() const { return prefixes_.entries(); }
  // Time spent computing and applying grammar masks since construction, seconds.
  double grammar_seconds() const { return grammars_.seconds(); }

 private:
  using Sequence = BatchSequence;
  bool fits_rows(int64_t need, int n) const;
  void plan_prefix(Sequence& s);
  void drop_prefix(int e);  // and its waiters prefill on their own
  void copy_prefixes();     // waiting requests whose snapshot is ready copy it
  void take_row(Sequence& s, float* logits, BatchStepStats& st);
  void share_prompt(Sequence& leader, const float* logits, BatchStepStats& st);
  void finish(Sequence& s, const char* reason);

  Model& model_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // index = KV-cache sequence
  PrefixCache prefixes_;
  grammar::GrammarCache grammars_;
  bool sharing_ = true;
  int64_t prefix_copied_ = 0;  // tokens copied since the last step's figures
  int64_t refused_rows_ = 0;
  std::vector<BatchToken> batch_;
  std::vector<Sequence*> batch_owner_;  // which sequence asked for each logits row
  std::vector<float> logits_;
  std::vector<float> row_copy_;  // a logits row for a choice sharing its leader's
  std::vector<std::pair<int, GenerationResult>> finished_;
  std::vector<std::pair<Sequence*, const char*>> finishing_;  // finished by this step, stats pending
  std::vector<int32_t> step_tokens_;        // [slot] tokens of each sequence in this step's forward pass
  std::vector<int32_t> step_decoded_;       // [slot] of which decode tokens (0 or 1)
  std::vector<RequestShare*> step_shares_;  // [slot] whose share of the step it takes
  int next_handle_ = 0;
  BatchStepStats last_step_;
  BatchRunStats totals_;
};

}  // namespace ns
