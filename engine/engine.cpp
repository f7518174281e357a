// The engine facade: loads the model, runs generations through the batch
// step loop (generation_batch.cpp).
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "engine/generation_batch.h"
#include "engine/model/model.h"
#include "common/error.h"

namespace ns {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(const std::string& path, const EngineOptions& opts) {
    const auto t0 = Clock::now();
    ModelOptions mo;
    mo.threads = opts.threads;
    mo.context = opts.context;
    mo.n_seq = std::max(1, opts.max_sequences);
    mo.max_batch = std::max(0, opts.max_batch_tokens);
    mo.kv_tokens = opts.kv_tokens;
    mo.streaming.memory_budget = opts.memory_budget;
    mo.streaming.io_mode = opts.io_mode;
    mo.streaming.cache_policy = opts.cache_policy;
    mo.streaming.io_queue_depth = static_cast<uint32_t>(std::max(1, opts.io_queue_depth));
    mo.arch.mla_expanded_cache = opts.mla_expanded_cache;
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
    summary_.file_bytes = model_->file().file_size();
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

  std::unique_ptr<GenerationBatch> open_batch() override { return std::make_unique<GenerationBatch>(*model_); }

 private:
  std::unique_ptr<Model> model_;
  ModelSummary summary_;
  double load_ms_ = 0;
};

}  // namespace

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

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace ns
