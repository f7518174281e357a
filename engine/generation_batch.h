// Continuous batching: several generations advance together, one forward pass
// per step over the next token of every sequence (and prompt chunks of the
// ones still prefilling), so every weight - each routed expert above all - is
// read once per step for all of them. Requests join and leave at any step.
//
// Each sequence keeps its own sampler, seed, stop strings and limits; its
// tokens are the same as when it runs alone (the forward pass computes every
// token independently of the others in the batch).
//
// Stats: every step() records a BatchStepStats (last_step(); summed in
// totals()): sequences and tokens in the forward pass, distinct experts
// routed to and how many came from the cache or the disk, bytes read, wall
// time split into I/O wait and compute. Each finished request's
// GenerationResult::stats is filled like Engine::generate fills it, as that
// request saw it: its prefill and decode time and rates, peak RSS, and its
// share of the streaming figures. A step's bytes_read, io_wait, compute and
// read time are shared among the sequences in it in proportion to their tokens
// in the forward pass (a sequence prefilling 200 prompt tokens next to 4
// decoding ones carries 200/204 of that step); bytes are split in whole bytes
// so that the shares of a step sum exactly to its bytes_read, the rest within
// floating-point rounding. cache_hit_rate and prefetch_accuracy are the ratios
// over the steps the request took part in; avg_batch_size the mean number of
// sequences in them. decode_share_ms splits the time of each step that
// decoded evenly among the tokens it decoded, so the shares of a run sum to
// totals().decode_seconds and decoded tokens / share is the batch's rate.
//
// Constrained decoding: a request whose params carry a grammar (GBNF) has it
// parsed once per distinct text for the batch's life (errors: add() throws
// ns::Error(invalid_input) and the batch is unchanged); before each of its
// draws the logits of the tokens the grammar forbids become -inf
// (engine/grammar/matcher.h: a prefix-trie walk, masks cached by grammar state
// and shared by the requests of one grammar); an end-of-generation token is
// allowed only where the grammar is complete, and the request finishes
// ("stop") as soon as its grammar is complete and allows nothing more.
// Replayed checkpoint tokens are fed to the grammar too. If the vocabulary has
// no token the grammar allows, the request finishes with finish_reason "error"
// and GenerationResult::error says why. Each choice of a request (below) has
// its own matcher; logprobs are recorded from the row before the mask.
//
// Several choices (params.n > 1): one request, n sequences. Choice 0 prefills
// the prompt alone; when its prompt is in the cache, its state (attention
// rows of every attention layer and the recurrent state of every KDA layer,
// Model::copy_sequence) is copied into the other n - 1 slots, which sample
// their first token from a copy of the same logits row. Choice k draws with
// seed + k, so it equals the single-choice request with that seed (the
// forward pass computes every sequence alike). The request finishes when all
// its choices have: one result, choice 0 in its GenerationChoice part, the
// others in more_choices. A false from on_progress cancels every choice.
// Resuming: each choice replays its own checkpointed tokens after the copy.
//
// Logprobs (params.logprobs): each accepted token's record is taken from the
// raw logits row before the sampler touches it (engine/sampler/logprobs.h);
// replayed tokens keep the records their checkpoint holds, so a resumed
// request reports what an uninterrupted one does.
//
// KV rows (docs/long-context.md): each sequence reserves prompt + max_tokens
// rows of the model's KV pool (at most its context) when it joins and
// releases them when it finishes, so the batch's size follows the jobs'
// actual lengths: a pool of 64K tokens takes 64 jobs of 1K or 1 of 64K. A
// request that can never fit the pool is refused (invalid_input, naming its
// lengths and the fix); one that does not fit the rows free now is not
// added (add returns kNoRoom, the batch unchanged) and should be offered
// again when largest_free_rows() >= refused_rows(). A sequence's tokens do
// not depend on where its rows lie, so batched output still equals alone.
//
// Not thread-safe. Uses the model's KV-cache sequences; at most
// model.n_seq() sequences are active at once (a request of n choices takes n).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/batch_stats.h"
#include "engine/generation.h"
#include "engine/model/model.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"

namespace ns {

class GenerationBatch {
 public:
  explicit GenerationBatch(Model& model);
  ~GenerationBatch();

  // Tokenizes and validates; throws ns::Error(invalid_input) for a bad request
  // (the batch is unchanged), among them params.n above the slots the model
  // has. Returns the request's handle, or kNoRoom when the KV pool lacks the
  // rows now (above). Requires free_slots() >= params.n.
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

  // Runs requests to completion, up to n_seq at a time, results in request order.
  static std::vector<GenerationResult> run_all(Model& model, std::vector<GenerationRequest> requests);

  // The figures of the latest step() that ran a forward pass (zeros before the first).
  const BatchStepStats& last_step() const { return last_step_; }
  // Sum of every step since construction or reset_totals().
  const BatchRunStats& totals() const { return totals_; }
  void reset_totals() { totals_ = {}; }
  // Time spent computing and applying grammar masks since construction, seconds.
  double grammar_seconds() const { return grammar_s_; }

 private:
  struct Sequence;
  struct StepMark;  // counters at the start of a step
  struct Grammars;  // parsed grammars, their mask caches, the vocabulary's trie
  bool constrain(Sequence& s, float* logits, int64_t n_vocab);
  bool fits_rows(int64_t need, int n) const;
  int64_t refused_rows_ = 0;
  struct Group;     // the choices of a request with n > 1
  std::unique_ptr<Sequence> make_sequence(GenerationRequest request, std::span<const int32_t> prompt);
  void take_row(Sequence& s, float* logits, BatchStepStats& st);
  void share_prompt(Sequence& leader, const float* logits, BatchStepStats& st);
  bool report(Sequence& s);
  void add_pieces(const GenerationChoice& c, GenerationResult& out) const;  // the texts of c's logprob ids
  void finish(Sequence& s, const char* reason);
  StepMark mark() const;
  BatchStepStats measure(const StepMark& start) const;
  void attribute(const BatchStepStats& step);
  Model& model_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // index = KV-cache sequence
  std::vector<BatchToken> batch_;
  std::vector<Sequence*> batch_owner_;            // which sequence asked for each logits row
  std::vector<float> logits_;
  std::vector<float> row_copy_;       // a logits row for a choice sharing its leader's
  std::vector<std::pair<int, GenerationResult>> finished_;
  std::vector<std::pair<Sequence*, const char*>> finishing_;  // finished by this step, stats pending
  std::vector<int32_t> step_tokens_;  // [slot] tokens of each sequence in this step's forward pass
  std::vector<int32_t> step_decoded_; // [slot] of which decode tokens (0 or 1)
  int next_handle_ = 0;
  BatchStepStats last_step_;
  BatchRunStats totals_;
  std::unique_ptr<Grammars> grammars_;
  double grammar_s_ = 0;
};

}  // namespace ns
