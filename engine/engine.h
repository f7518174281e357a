// The engine's public face, the one door the daemon and the CLI use
// (tests/lint/check_includes.sh keeps it so): load a GGUF model, generate text
// for a prompt or for several jobs at once (Engine::Batch), the reference
// logits of a prompt, what a model file says without loading it (ModelFile,
// describe_model), and which compute kernels run. Its value types live in
// generation.h (requests, progress, results), batch_stats.h (a step's
// figures) and model_report.h (`model info`); errors and sampling parameters
// in common/.
//
// Contract: load() throws ns::Error (bad_model / io / invalid_input) with a
// message naming the file and the problem; memory the load cannot have (a
// context, batch or KV pool larger than the process may map, e.g. under
// `ulimit -v`) is invalid_input naming the sizes and the fix, refused before
// the mapping where it can be, never a std::bad_alloc. generate() throws ns::Error
// (invalid_input) for bad parameters or a prompt longer than the context;
// it is not thread-safe (one generate at a time per Engine).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/sampling_params.h"
#include "engine/chat/model_chat_template.h"
#include "engine/api/batch_stats.h"
#include "engine/api/engine_options.h"
#include "engine/api/generation.h"
#include "engine/model_report.h"

namespace ns {

// EngineOptions: engine/api/engine_options.h (declared once, with its table).

struct ModelSummary {
  std::string path, name, architecture;
  int64_t n_params = 0, n_layers = 0, n_embd = 0, n_vocab = 0, n_experts = 0, n_experts_used = 0;
  int64_t context_length = 0;
  uint64_t file_bytes = 0;
  // What the memory plan chose (plan_fit, engine/model/fit_plan.h): generations decoded together (at most
  // EngineOptions::max_sequences), the KV pool's tokens they share, tokens per forward pass; and when fewer
  // sequences than asked, why not more (the larger batch's refusal).
  int64_t sequences = 0, kv_tokens = 0, prefill_chunk = 0;
  std::string fewer_sequences_reason;
  // tokenizer.chat_template (engine/chat/), none for a base model; when the
  // key cannot be read, none and chat_template_problem says why.
  std::optional<std::string> chat_template;
  std::string chat_template_problem;
  // How chat jobs become prompts: the template in the Jinja engine with the
  // vocabulary's BOS/EOS (engine/chat/model_chat_template.h); null when the
  // model has no usable template (chat_template_problem says why, if it has one).
  std::shared_ptr<const chat::ChatPrompter> chat;
  std::string bos_text, eos_text;  // the vocabulary's BOS / EOS token texts ("" when it has none)
};

// Top-k (token id, logit) pairs of one logits row, best first (ties by lower id).
using TopLogits = std::vector<std::pair<int32_t, float>>;

// Engine::logits: the logits the reference's are compared with (tests/conformance/).
struct LogitsReport {
  std::vector<int32_t> prompt_tokens;
  std::vector<TopLogits> prompt_top;  // one per prompt position
  std::vector<int32_t> greedy;        // the greedy continuation's tokens
  std::vector<TopLogits> greedy_top;  // one per greedy token, the logits after it
};

class Engine {
 public:
  // Several generations at once (continuous batching), up to max_sequences
  // active: the step loop of engine/batch/generation_batch.h (its contract; the
  // design - joining, KV rows, stats, grammars, choices - in docs/architecture.md).
  class Batch {
   public:
    virtual ~Batch() = default;
    // Tokenizes and validates; throws ns::Error(invalid_input) for a bad
    // request (the batch is unchanged). Returns the request's handle, or
    // kBatchNoRoom when the KV pool lacks its rows now: offer it again once
    // largest_free_rows() >= refused_rows(). Requires free_slots() >= params.n.
    virtual int add(GenerationRequest request) = 0;
    virtual int64_t largest_free_rows() const = 0;
    virtual int64_t refused_rows() const = 0;
    virtual int free_slots() const = 0;
    virtual int active() const = 0;
    // One forward pass over all active requests. Returns false when none is active.
    virtual bool step() = 0;
    // Requests that finished since the last call, with their handles.
    virtual std::vector<std::pair<int, GenerationResult>> take_finished() = 0;
    // The figures of the latest step() (zeros before the first), and their
    // sum since the batch opened or reset_totals().
    virtual const BatchStepStats& last_step() const = 0;
    virtual const BatchRunStats& totals() const = 0;
    virtual void reset_totals() = 0;
    virtual double grammar_seconds() const = 0;  // computing and applying grammar masks, seconds
  };

  static std::unique_ptr<Engine> load(const std::string& gguf_path, const EngineOptions& opts);
  virtual ~Engine() = default;

  // `resume` holds completion tokens of an interrupted run of the same job
  // (checkpointed): they are replayed instead of sampled, and the sampler's
  // random stream is advanced past them, so the result equals an uninterrupted run.
  virtual GenerationResult generate(const std::string& prompt, const SamplingParams& params,
                                    const ProgressFn& on_progress = {}, const std::vector<int32_t>& resume = {}) = 0;
  // One batch at a time per Engine, and no generate() or logits() while it is open.
  virtual std::unique_ptr<Batch> open_batch() = 0;
  // The prompt's logits at every position (the top `top` of each) and a
  // greedy continuation of `greedy` tokens, in sequence 0 of the cache.
  // Throws ns::Error(invalid_input) for a prompt that tokenizes to nothing or
  // that, with the greedy tokens, does not fit the context.
  virtual LogitsReport logits(const std::string& prompt, int greedy, int top) = 0;
  virtual const ModelSummary& summary() const = 0;
  virtual double load_ms() const = 0;
};

// What a model file says without loading its weights: the checks
// `submit --config` makes. Throws ns::Error (bad_model / io) when the file
// cannot be read.
class ModelFile {
 public:
  static std::unique_ptr<ModelFile> open(const std::string& gguf_path);
  virtual ~ModelFile() = default;
  virtual const std::optional<std::string>& chat_template() const = 0;  // none: a base model
  virtual int64_t context_length() const = 0;                           // the model's own (n_ctx_train)
  virtual int64_t count_tokens(const std::string& text) const = 0;      // as the engine tokenizes a prompt
  // The text of the vocabulary's BOS / EOS token ("" when it has none): a chat
  // template's bos_token and eos_token.
  virtual std::string bos_text() const = 0;
  virtual std::string eos_text() const = 0;
};

// The compute kernels (config key cpu_features, --cpu-features): "auto"
// selects the best this CPU has; "scalar", "avx2" or "avx512" force that
// path. check_cpu_features throws ns::Error(invalid_input) for another name
// or a path the CPU lacks, naming what it has; use_cpu_features also applies
// it, for every engine in the process (between generations).
void check_cpu_features(const std::string& setting);
void use_cpu_features(const std::string& setting);
const char* cpu_features_in_use();     // "avx512", "avx2" or "scalar"
std::string cpu_features_available();  // what the CPU offers, for messages: "avx2 fma f16c avx512f ..."

// Model files of loaded engines that were truncated or rewritten while in use
// (engine/gguf/map_guard.h): their reads since returned zeros, so the work
// of any engine on them since is wrong and must be discarded, and the engine
// dropped. Empty while every file is whole.
std::vector<std::string> damaged_model_files();

// A warning when an explicit memory_budget is more than the memory this
// process may use (its cgroup's limit, else the machine's): names both figures
// and the fix. "" when it fits (engine/stream/memory_limit.h).
std::string memory_budget_warning(uint64_t memory_budget);

}  // namespace ns
