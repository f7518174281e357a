// The engine facade: loads the model, runs generations through the batch
// step loop (generation_batch.cpp), and answers for the model file and the
// kernels, so the daemon and the CLI need no engine internals.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <string>

#include "common/error.h"
#include "engine/chat/model_chat_template.h"
#include "engine/batch/generation_batch.h"
#include "engine/gguf/gguf_set.h"
#include "engine/gguf/map_guard.h"
#include "engine/kernels/kernels.h"
#include "engine/model/model.h"
#include "engine/stream/memory_limit.h"
#include "engine/tokenizer/tokenizer.h"

namespace ns {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A special token's text ("" when the vocabulary has none): a chat template's bos_token / eos_token.
std::string special_text(const Tokenizer& tok, int32_t id) {
  return id < 0 ? std::string() : tok.token_to_piece(id, true);
}

// Engine::Batch over the step loop.
class BatchImpl final : public Engine::Batch {
 public:
  explicit BatchImpl(Model& model) : batch_(model) {}
  int add(GenerationRequest request) override { return batch_.add(std::move(request)); }
  int64_t largest_free_rows() const override { return batch_.largest_free_rows(); }
  int64_t refused_rows() const override { return batch_.refused_rows(); }
  int free_slots() const override { return batch_.free_slots(); }
  int active() const override { return batch_.active(); }
  bool step() override { return batch_.step(); }
  std::vector<std::pair<int, GenerationResult>> take_finished() override { return batch_.take_finished(); }
  const BatchStepStats& last_step() const override { return batch_.last_step(); }
  const BatchRunStats& totals() const override { return batch_.totals(); }
  void reset_totals() override { batch_.reset_totals(); }
  double grammar_seconds() const override { return batch_.grammar_seconds(); }

 private:
  GenerationBatch batch_;
};

// The top `k` of one logits row, best first (ties by lower id).
TopLogits top_logits(const float* row, int64_t n_vocab, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
  k = static_cast<int>(std::min<int64_t>(k, n_vocab));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
  TopLogits out;
  for (int i = 0; i < k; ++i) out.emplace_back(ids[i], row[ids[i]]);
  return out;
}

// One default, two spellings: the option table's (engine_options.h cannot include thread_pool.h).
static_assert(EngineOptions{}.thread_spin_us == ThreadPool::kDefaultSpinUs);

class EngineImpl final : public Engine {
 public:
  EngineImpl(const std::string& path, const EngineOptions& opts) {
    const auto t0 = Clock::now();
    ModelOptions mo;
    mo.engine = opts;  // the options whole: Model::load reads each where it is used
    model_ = Model::load(path, mo);
    const Hparams& hp = model_->hparams();
    summary_.path = path;
    summary_.name = hp.name;
    summary_.architecture = hp.arch;
    summary_.n_params = static_cast<int64_t>(model_->n_params());
    summary_.n_layers = hp.n_layer;
    summary_.n_embd = hp.n_embd;
    summary_.n_vocab = hp.n_vocab;
    summary_.n_experts = hp.n_expert;
    summary_.n_experts_used = hp.n_expert_used;
    summary_.context_length = model_->n_ctx();
    summary_.file_bytes = model_->files().total_bytes();
    const FitPlan& fit = model_->fit();
    summary_.sequences = fit.sequences;
    summary_.kv_tokens = fit.kv_tokens;
    summary_.prefill_chunk = fit.prefill_chunk;
    if (fit.sequences < fit.sequences_asked) summary_.fewer_sequences_reason = fit.reason;
    try {
      const Tokenizer& tok = model_->tokenizer();
      summary_.bos_text = special_text(tok, tok.bos());
      summary_.eos_text = special_text(tok, tok.eos());
      summary_.chat_template = chat::read_chat_template(model_->files().metadata());
      if (summary_.chat_template)
        summary_.chat = std::make_shared<const chat::ChatPrompter>("", summary_.chat_template, summary_.bos_text,
                                                                   summary_.eos_text);
    } catch (const Error& e) {
      summary_.chat_template_problem = e.what();
    }
    load_ms_ = ms_since(t0);
  }

  const ModelSummary& summary() const override { return summary_; }
  double load_ms() const override { return load_ms_; }

  GenerationResult generate(const std::string& prompt, const SamplingParams& params, const ProgressFn& on_progress,
                            const std::vector<int32_t>& resume) override {
    // One request through the batch loop: there is a single step loop for
    // both, and it fills the stats (the request's share of every step is all of it).
    GenerationBatch batch(*model_);
    batch.add({prompt, params, on_progress, resume, {}, {}});
    while (batch.step()) {
    }
    auto done = batch.take_finished();
    if (done.size() != 1) throw Error(ErrorKind::internal, "generate: the request did not finish");
    if (done[0].second.finish_reason == "error") throw Error(ErrorKind::invalid_input, done[0].second.error);
    return std::move(done[0].second);
  }

  std::unique_ptr<Batch> open_batch() override { return std::make_unique<BatchImpl>(*model_); }

  LogitsReport logits(const std::string& prompt, int greedy, int top) override {
    const int64_t n_vocab = model_->n_vocab();
    LogitsReport out;
    out.prompt_tokens = model_->tokenizer().encode(prompt, true, true);
    const std::vector<int32_t>& toks = out.prompt_tokens;
    if (toks.empty()) throw Error(ErrorKind::invalid_input, "the prompt tokenizes to nothing");
    if (static_cast<int64_t>(toks.size()) + greedy > model_->n_ctx())
      throw Error(ErrorKind::invalid_input, "prompt plus greedy tokens exceed the context; raise --context");
    // Sequence 0's rows of the KV pool, which the memory budget may have
    // sized smaller than the context (a model whose own length is huge).
    if (!model_->reserve_rows(0, static_cast<int64_t>(toks.size()) + greedy))
      throw Error(ErrorKind::invalid_input,
                  "prompt plus greedy tokens exceed the KV cache the memory budget holds; "
                  "give a smaller --context or fewer tokens");
    std::vector<float> logits;
    const size_t chunk = static_cast<size_t>(model_->max_batch_tokens());
    for (size_t p = 0; p < toks.size(); p += chunk) {
      const size_t n = std::min(toks.size() - p, chunk);
      model_->forward(std::span(toks).subspan(p, n), static_cast<int64_t>(p), true, logits);
      for (size_t t = 0; t < n; ++t) out.prompt_top.push_back(top_logits(&logits[t * n_vocab], n_vocab, top));
    }
    // Greedy continuation from the last prompt position's logits.
    std::vector<float> last(logits.end() - n_vocab, logits.end());
    int64_t pos = static_cast<int64_t>(toks.size());
    for (int i = 0; i < greedy; ++i) {
      const int32_t id = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      out.greedy.push_back(id);
      const int32_t one[1] = {id};
      model_->forward(one, pos++, false, last);
      out.greedy_top.push_back(top_logits(last.data(), n_vocab, top));
    }
    return out;
  }

 private:
  std::unique_ptr<Model> model_;
  ModelSummary summary_;
  double load_ms_ = 0;
};

class ModelFileImpl final : public ModelFile {
 public:
  explicit ModelFileImpl(const std::string& path) {
    // A split model's metadata is its first shard's; the set is checked whole.
    const auto set = gguf::GgufSet::open(path);
    const gguf::GgufFile& f = set->metadata();
    chat_template_ = chat::read_chat_template(f);
    n_ctx_train_ = read_hparams(f).n_ctx_train;
    tokenizer_ = Tokenizer::from_gguf(f);
  }
  const std::optional<std::string>& chat_template() const override { return chat_template_; }
  int64_t context_length() const override { return n_ctx_train_; }
  int64_t count_tokens(const std::string& text) const override {
    return static_cast<int64_t>(tokenizer_->encode(text, true, true).size());
  }
  std::string bos_text() const override { return special_text(*tokenizer_, tokenizer_->bos()); }
  std::string eos_text() const override { return special_text(*tokenizer_, tokenizer_->eos()); }

 private:
  std::optional<std::string> chat_template_;
  int64_t n_ctx_train_ = 0;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace

std::unique_ptr<ModelFile> ModelFile::open(const std::string& gguf_path) {
  return std::make_unique<ModelFileImpl>(gguf_path);
}

void check_cpu_features(const std::string& setting) { (void)kernels::parse_cpu_features(setting); }
void use_cpu_features(const std::string& setting) { kernels::set_isa_override(setting); }
const char* cpu_features_in_use() { return kernels::isa_name(kernels::active_isa()); }
std::string cpu_features_available() { return kernels::cpu_feature_summary(); }

std::vector<std::string> damaged_model_files() { return gguf::faulted_files(); }

std::string memory_budget_warning(uint64_t memory_budget) { return stream::budget_over_limit(memory_budget); }

std::unique_ptr<Engine> Engine::load(const std::string& gguf_path, const EngineOptions& opts) {
  return std::make_unique<EngineImpl>(gguf_path, opts);
}

std::string context_overflow_problem(int64_t prompt_tokens, int64_t context, int64_t model_context) {
  std::string fix = "shorten the prompt";
  if (context < model_context)
    fix += " or raise `context` (the daemon config's, or run --context) up to the model's own length, " +
           std::to_string(model_context);
  return "the prompt is " + std::to_string(prompt_tokens) + " tokens but the context holds " + std::to_string(context) +
         " (a prompt must leave room for at least one generated token): " + fix +
         (context < model_context ? "" : " (the context is already the model's own length)");
}

}  // namespace ns
