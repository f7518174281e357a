// The engine's public face: load a GGUF model, generate text for a prompt.
// The daemon and the CLI use only this header.
//
// Contract: load() throws ns::Error (bad_model / io / invalid_input) with a
// message naming the file and the problem. generate() throws ns::Error
// (invalid_input) for bad parameters or a prompt longer than the context;
// it is not thread-safe (one generate at a time per Engine).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler/logprobs.h"
#include "common/sampling_params.h"

namespace ns {

struct EngineOptions {
  int threads = 0;        // compute threads; 0 = all cores
  int context = 0;        // the longest sequence in tokens; 0 = the model's own length (n_ctx_train)
  int max_sequences = 1;  // generations decoded together (KV cache holds this many contexts)
  int max_batch_tokens = 0;  // tokens per forward pass (prefill chunk); 0 = sized from memory_budget
  int64_t kv_tokens = 0;     // KV cache tokens all sequences share (ModelOptions::kv_tokens); 0 = fit the budget
  // Weight streaming (engine/model/weight_streaming.h): the memory budget in
  // bytes (0 = what the machine has), io_mode uring | pread | mmap, the expert
  // cache's policy lru | lfu, reads in flight.
  uint64_t memory_budget = 0;
  std::string io_mode = "uring";
  std::string cache_policy = "lfu";
  int io_queue_depth = 16;
  // deepseek2 files with the fused attn_kv_b: cache expanded keys and values
  // as the reference does (its logits exactly) instead of the latent.
  bool mla_expanded_cache = false;
};

class GenerationBatch;

struct GenerationStats {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double load_ms = 0;       // model load (0 when the model was already loaded)
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  uint64_t peak_rss_bytes = 0;  // VmHWM of the process
  uint64_t bytes_read = 0;      // weight bytes read from disk for this generation
  uint64_t kv_bytes_per_token = 0;  // KV cache bytes one token of context takes (all layers)
  // Weight streaming, for this generation (generate(); zeros where nothing was streamed):
  double read_gib_s = 0;        // read rate while reads were in flight
  double io_wait_ms = 0;        // compute blocked waiting for expert reads
  double compute_ms = 0;        // prefill + decode time not spent waiting
  double cache_hit_rate = 0;    // expert cache hits / lookups
  double prefetch_accuracy = 0; // prefetched experts that were then used / prefetched
  // Batching (GenerationBatch): the forward passes this generation took part
  // in and the mean number of sequences in them (1 when it ran alone). In a
  // batch, bytes_read, io_wait_ms, compute_ms and the read time behind
  // read_gib_s are this generation's share of each step's figures, in
  // proportion to its tokens in the step; cache_hit_rate and
  // prefetch_accuracy are those of the steps it took part in.
  int32_t batch_steps = 0;
  double avg_batch_size = 0;
  // This generation's share of the wall time of the steps that decoded its
  // tokens: each step that decoded tokens splits its time evenly among them
  // (a prompt chunk riding along is charged to the decoders). Summed over the
  // jobs of a batch it is the batch's decoding wall time, so decoded tokens /
  // decode_share_ms is the batch's rate; alone it equals decode_ms.
  double decode_share_ms = 0;
};

// One choice of a generation: what a single-choice request returns, and each
// of the n choices of SamplingParams::n.
struct GenerationChoice {
  std::string text;
  std::string finish_reason;     // "stop" (EOS, stop string, grammar complete), "length", "cancelled", "error"
  std::string error;             // finish_reason "error": why (GenerationBatch only; generate() throws instead)
  std::vector<int32_t> tokens;   // completion token ids
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
  sampler::TokenPieces pieces;  // params.logprobs: the text of every token id the records name
};

struct GenerationProgress {
  int32_t prompt_tokens = 0;
  int32_t prefilled = 0;       // prompt tokens processed so far
  int32_t generated = 0;       // completion tokens so far (resumed ones included)
  std::string piece;           // text of the newest token (may be a partial UTF-8 sequence)
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

struct ModelSummary {
  std::string path, name, architecture;
  int64_t n_params = 0, n_layers = 0, n_embd = 0, n_vocab = 0, n_experts = 0, n_experts_used = 0;
  int64_t context_length = 0;
  uint64_t file_bytes = 0;
};

class Engine {
 public:
  static std::unique_ptr<Engine> load(const std::string& gguf_path, const EngineOptions& opts);
  virtual ~Engine() = default;

  // `resume` holds completion tokens of an interrupted run of the same job
  // (checkpointed): they are replayed instead of sampled, and the sampler's
  // random stream is advanced past them, so the result equals an uninterrupted run.
  virtual GenerationResult generate(const std::string& prompt, const SamplingParams& params,
                                    const ProgressFn& on_progress = {},
                                    const std::vector<int32_t>& resume = {}) = 0;
  // Several generations at once (continuous batching), up to max_sequences
  // active; see engine/generation_batch.h. One batch at a time per Engine.
  virtual std::unique_ptr<GenerationBatch> open_batch() = 0;
  virtual const ModelSummary& summary() const = 0;
  virtual double load_ms() const = 0;
};

// The error for a prompt of `prompt_tokens` that does not fit a context of
// `context` tokens (the model's own length is `model_context`): the lengths
// and the fix. The engine (at run) and `submit --config` (at submit) say the same.
std::string context_overflow_problem(int64_t prompt_tokens, int64_t context, int64_t model_context);

// Peak resident set size of this process (VmHWM), bytes; 0 if unknown.
uint64_t peak_rss_bytes();

}  // namespace ns
