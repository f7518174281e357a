// One sequence of the batch step loop (generation_batch.h): one choice of a
// request in one of the model's KV-cache sequences, from its prompt to its
// finish. It keeps its own sampler (seeded), stop strings, grammar matcher,
// logprob recorder and limits, so its tokens are those it gets alone.
//
// Phase (one at a time, in this order, each one skippable; a sequence may
// finish in any of them and then leaves the batch):
//   waiting_leader  choice k > 0 of a request: until its leader's prompt state is copied in
//   waiting_prefix  until the prefix snapshot use_prefix is ready and copied in (prefix_cache.h)
//   prefilling      its prompt (and replayed checkpoint) goes through forward passes in chunks
//   decoding        one token per step
//
// The constructor tokenizes nothing (the batch gives the prompt's tokens) but
// validates the request's checkpoint and replays it into the history, the
// stop strings and the grammar: a resumed request's random stream skips the
// draws its tokens took, and with logprobs it replays only as far as its
// checkpoint holds their records. Throws ns::Error(invalid_input) naming a
// checkpoint outside the vocabulary or its grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/api/generation.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/model/model.h"
#include "engine/batch/request_accounting.h"
#include "engine/sampler/logprobs.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"

namespace ns {

// The choices of a request with n > 1: one result when all have finished.
struct ChoiceGroup {
  int handle = 0;
  int remaining = 0;    // choices still running
  bool shared = false;  // the prompt's state is in every choice's slot
  bool cancelled = false;
  std::vector<GenerationResult> results;         // [choice], filled as each finishes
  std::vector<const GenerationChoice*> choices;  // [choice]: the live result, then results[k]
  GenerationProgress progress;                   // what on_progress sees (sums over the choices)
  double read_busy_s = 0;                        // summed over the finished choices

  // Choice k finished with r: true when it was the last one.
  bool add(int k, GenerationResult r, double choice_read_busy_s);
  // The request's one result: choice 0 in its GenerationChoice part, the others in more_choices.
  GenerationResult take_result();
};

struct BatchSequence {
  enum class Phase { waiting_leader, waiting_prefix, prefilling, decoding };

  BatchSequence(GenerationRequest request, std::span<const int32_t> prompt, const Model& model,
                grammar::GrammarCache& grammars);
  std::span<const int32_t> prompt() const { return {history.data(), static_cast<size_t>(n_prompt)}; }
  // Draws its next token from the logits row lg (recorded before the grammar's
  // mask); `accepted` when a token joined its output. Returns the finish
  // reason reached ("stop", "length", "error" with result.error saying why) or null.
  const char* sample(float* lg, const Model& model, grammar::GrammarCache& grammars, bool& accepted);
  // Calls on_progress (with n > 1, the group's sums); false: cancelled (every choice).
  bool report();

  Phase phase = Phase::prefilling;
  bool announced = false;  // its first report (prefilled 0) is made
  int handle = 0;
  std::shared_ptr<ChoiceGroup> group;  // n > 1; else null
  int choice = 0;
  int32_t seq = 0;  // its KV-cache sequence (= its slot)
  GenerationRequest req;
  std::vector<int32_t> history;  // prompt + completion (+ replayed checkpoint)
  int64_t n_prompt = 0;
  int64_t fed = 0;     // tokens of history already in the KV cache
  int64_t n_fill = 0;  // history length before decoding starts (prompt + replay)
  int64_t rows = 0;    // KV rows it reserved: prompt + max_tokens, at most n_ctx
  size_t n_resume = 0;
  int use_prefix = -1;   // waiting_prefix: the snapshot it copies
  int make_prefix = -1;  // a snapshot its prefill stops at and fills, or -1
  std::optional<sampler::Sampler> sampler;
  std::optional<sampler::StopMatcher> stops;
  std::optional<sampler::LogprobRecorder> recorder;       // params.logprobs
  std::shared_ptr<grammar::GrammarCache::Entry> grammar;  // constrained decoding, else null
  std::optional<grammar::Matcher> matcher;
  GenerationResult result;
  GenerationProgress progress;
  const GenerationChoice* self = nullptr;  // &result, for progress.choices (n = 1)
  RequestShare share;                      // its share of the steps and its clock
};

// Adds the texts of the token ids r's logprob records name (its choices' too) to r.pieces.
void add_pieces(GenerationResult& r, const Tokenizer& tok);

}  // namespace ns
