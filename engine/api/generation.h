// The value types of a generation: what a request asks (GenerationRequest),
// what it reports while it runs (GenerationProgress) and what it returns
// (GenerationResult, its choices and stats). Used by the engine facade
// (engine.h), the batch step loop (generation_batch.h) and their callers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/generation_stats.h"
#include "common/sampling_params.h"
#include "engine/sampler/logprobs.h"

namespace ns {

// One choice of a generation: what a single-choice request returns, and each
// of the n choices of SamplingParams::n.
struct GenerationChoice {
  std::string text;
  std::string finish_reason;         // "stop" (EOS, stop string, grammar complete), "length", "cancelled", "error"
  std::string error;                 // finish_reason "error": why (GenerationBatch only; generate() throws instead)
  std::vector<int32_t> tokens;       // completion token ids
  sampler::ChoiceLogprobs logprobs;  // params.logprobs: one record per token (engine/sampler/logprobs.h)
};

// Choice 0 (the only one unless params.n > 1) and the generation's stats.
// With n > 1, prompt_tokens counts the prompt once (it is prefilled once) and
// completion_tokens sums every choice's tokens, as OpenAI's usage does; the
// times are the whole generation's.
struct GenerationResult : GenerationChoice {
  GenerationStats stats;
  // GenerationRequest::keep_tail: prompt tokens dropped from the front to fit
  // the context (stats.prompt_tokens counts those kept); 0 otherwise.
  int32_t prompt_tokens_dropped = 0;
  std::vector<GenerationChoice> more_choices;  // choices 1..n-1
  sampler::TokenPieces pieces;                 // params.logprobs: the text of every token id the records name
};

struct GenerationProgress {
  int32_t prompt_tokens = 0;
  int32_t prefilled = 0;                         // prompt tokens processed so far
  int32_t generated = 0;                         // completion tokens so far (resumed ones included)
  std::string piece;                             // text of the newest token (may be a partial UTF-8 sequence)
  const std::vector<int32_t>* tokens = nullptr;  // all completion tokens so far (for checkpoints)
  // Every choice so far (tokens and logprobs), in choice order, for
  // checkpoints. With n > 1, `generated` sums the choices' tokens and
  // `tokens` is choice 0's.
  std::span<const GenerationChoice* const> choices;
};

// Called when the prefill starts (prefilled 0, before the first chunk, which
// may take seconds), after each prefill chunk and after every token; return
// false to cancel.
using ProgressFn = std::function<bool(const GenerationProgress&)>;

struct GenerationRequest {
  std::string prompt;
  SamplingParams params;
  ProgressFn on_progress;                     // optional; false cancels this request only
  std::vector<int32_t> resume;                // checkpointed completion tokens to replay (choice 0)
  sampler::ChoiceLogprobs resume_logprobs;    // their records (params.logprobs); replay stops where these end
  std::vector<GenerationChoice> resume_more;  // n > 1: choices 1..n-1 checkpointed (tokens, logprobs)
  // A prompt too long for the context (or the KV pool) keeps its tail instead
  // of failing: its BOS (if the tokenizer adds one) and its last tokens, as
  // many as leave room for max_tokens (at least half the room); the result's
  // prompt_tokens_dropped says how many went. For documents (submit --dir).
  bool keep_tail = false;
};

// GenerationBatch::add / Engine::Batch::add: the KV pool lacks the rows the
// request needs now (docs/architecture.md, "KV rows").
inline constexpr int kBatchNoRoom = -1;

// The error for a prompt of `prompt_tokens` that does not fit a context of
// `context` tokens (the model's own length is `model_context`): the lengths
// and the fix. The engine (at run) and `submit --config` (at submit) say the same.
std::string context_overflow_problem(int64_t prompt_tokens, int64_t context, int64_t model_context);

}  // namespace ns
