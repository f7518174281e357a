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
// Prefix sharing (docs/batching.md): requests whose prompts begin alike (a
// JSONL batch's system prompt and instruction, a nightly batch's template)
// prefill the common part once. The model's spare sequences
// (Model::prefix_slots(), ModelOptions::prefix_cache) hold snapshots: the
// state after exactly P prompt tokens (attention rows 0..P-1, a sliding
// layer's ring as it stands after P, the recurrent state after P), keyed by a
// hash of those tokens; P is a multiple of kPrefixBlock, at least
// kPrefixMin, and at most the prompt's length - 1 (its last token is always
// computed: it gives the first logits). When a request joins (choice 0 of
// n), its prompt is compared with the snapshots (hash, then the tokens
// themselves: a collision shares nothing) and with the prompts of the
// requests in the batch, and the longest common part wins:
// - a snapshot: copied into its slot at the next step (Model::copy_sequence),
//   its prefill starts at P; one still being produced, it waits for (no
//   forward pass of its own meanwhile);
// - a request of the batch sharing P tokens that has not fed past P: that
//   one's prompt chunk ends at P, its state is snapshotted there and the
//   joiner waits for it; else the joiner's own prefill is split at P and
//   snapshotted, for later joiners (the daemon's jobs come one step apart).
// A job's tokens equal those without sharing: the copy holds exactly what its
// own prefill would have computed for positions < P (every token's result is
// independent of its batch neighbours and of where prefill chunks end). A
// resumed request replays its checkpoint after the copy; keep_tail prompts
// compare their kept tokens. A snapshot costs P rows of the KV pool while it
// is kept; the least recently used snapshot no request is waiting on is
// evicted when a slot or rows are wanted, a joining request's rows first
// (add() evicts before it answers kNoRoom; step() evicts all idle ones while
// a request is refused). A producer that finishes or is cancelled before P
// drops its snapshot, and its waiters prefill on their own.
// Stats: GenerationStats::prefix_tokens, the prompt tokens a request copied;
// BatchStepStats::prefix_tokens, those copied at a step (prefill_tokens
// counts only the tokens computed), so a batch of 64 jobs with a 300-token
// common prefix prefills the 300 once. set_prefix_sharing(false) turns it off.
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

  // Runs requests to completion, up to n_seq at a time, results in request
  // order; totals (optional) receives the run's totals().
  static std::vector<GenerationResult> run_all(Model& model, std::vector<GenerationRequest> requests,
                                               bool prefix_sharing = true, BatchRunStats* totals = nullptr);

  // The figures of the latest step() that ran a forward pass (zeros before the first).
  const BatchStepStats& last_step() const { return last_step_; }
  // Sum of every step since construction or reset_totals().
  const BatchRunStats& totals() const { return totals_; }
  void reset_totals() { totals_ = {}; }
  // Prefix sharing (above): on by default when the model has prefix slots;
  // off, every request prefills its whole prompt (for comparison).
  static constexpr int64_t kPrefixBlock = 16;  // snapshot lengths are multiples of this
  static constexpr int64_t kPrefixMin = 32;    // shorter common parts are not shared
  void set_prefix_sharing(bool on);
  bool prefix_sharing() const { return sharing_ && !prefixes_.empty(); }
  // Snapshots kept now (ready or being produced), for tests and logs.
  int prefix_entries() const;
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
  struct Prefix;    // a prompt-prefix snapshot in one of the model's spare sequences
  void plan_prefix(Sequence& s);
  int take_prefix(int64_t len, int keep);  // a free snapshot with len rows reserved, or -1
  bool evict_prefix(int keep);             // drops the least recently used idle snapshot
  void drop_prefix(int e);
  void snapshot(Sequence& s);              // s's state becomes its snapshot's
  void copy_prefixes();                    // waiting requests whose snapshot is ready copy it
  std::vector<Prefix> prefixes_;
  bool sharing_ = true;
  uint64_t prefix_tick_ = 0;
  int64_t prefix_copied_ = 0;              // tokens copied since the last step's figures
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
