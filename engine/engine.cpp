// The step loop: tokenize, prefill in chunks, then sample / detokenize /
// check stops / forward one token at a time, with timings.
#include "engine/engine.h"

#include <chrono>
#include <fstream>
#include <string>

#include "engine/model/model.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"
#include "engine/util/error.h"

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
    if (prompt.empty()) throw Error(ErrorKind::invalid_input, "the prompt is empty: give some text to continue");
    sampler::Sampler sampler(params, static_cast<int32_t>(model_->n_vocab()));
    const Tokenizer& tok = model_->tokenizer();
    std::vector<int32_t> history = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/true);
    const int64_t n_prompt = static_cast<int64_t>(history.size()), n_ctx = model_->n_ctx();
    if (n_prompt == 0) throw Error(ErrorKind::invalid_input, "the prompt tokenizes to nothing");
    for (const int32_t id : resume)
      if (id < 0 || id >= model_->n_vocab())
        throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(id) + " is outside the vocabulary");
    if (n_prompt >= n_ctx)
      throw Error(ErrorKind::invalid_input, "the prompt is " + std::to_string(n_prompt) + " tokens but the context holds " +
                                                std::to_string(n_ctx) + ": shorten the prompt or raise `context`");
    history.reserve(static_cast<size_t>(n_ctx));

    GenerationResult r;
    r.stats.prompt_tokens = static_cast<int32_t>(n_prompt);
    r.tokens.reserve(static_cast<size_t>(params.max_tokens));
    sampler::StopMatcher stops(params.stop, 4096);
    GenerationProgress progress;
    progress.prompt_tokens = r.stats.prompt_tokens;
    progress.tokens = &r.tokens;

    // A resumed job replays its checkpointed tokens as part of the prefill.
    const size_t n_resume = std::min(resume.size(), static_cast<size_t>(std::max(0, params.max_tokens - 1)));
    for (size_t i = 0; i < n_resume && static_cast<int64_t>(history.size()) < n_ctx - 1; ++i) {
      history.push_back(resume[i]);
      r.tokens.push_back(resume[i]);
      stops.feed(tok.token_to_piece(resume[i]));
    }
    sampler.skip_draws(r.tokens.size());
    const int64_t n_fill = static_cast<int64_t>(history.size());

    // Prefill in chunks of the model's batch size; only the last token's logits are needed.
    const auto t_prefill = Clock::now();
    const int64_t chunk = model_->max_batch();
    for (int64_t p = 0; p < n_fill && r.finish_reason.empty(); p += chunk) {
      const int64_t n = std::min(chunk, n_fill - p);
      model_->forward(std::span(history).subspan(static_cast<size_t>(p), static_cast<size_t>(n)), p, false, logits_);
      progress.prefilled = static_cast<int32_t>(std::min(p + n, n_prompt));
      progress.generated = static_cast<int32_t>(r.tokens.size());
      if (on_progress && !on_progress(progress)) r.finish_reason = "cancelled";
    }
    r.stats.prefill_ms = ms_since(t_prefill);
    if (stops.stopped()) r.finish_reason = "stop";

    const auto t_decode = Clock::now();
    std::string text;
    while (r.finish_reason.empty()) {
      const int32_t id = sampler.sample(logits_, history);
      if (!params.ignore_eos && tok.is_end_of_generation(id)) {
        r.finish_reason = "stop";
        break;
      }
      history.push_back(id);
      r.tokens.push_back(id);
      progress.generated = static_cast<int32_t>(r.tokens.size());
      progress.piece = tok.token_to_piece(id);
      if (stops.feed(progress.piece)) r.finish_reason = "stop";
      else if (progress.generated >= params.max_tokens || static_cast<int64_t>(history.size()) >= n_ctx)
        r.finish_reason = "length";
      if (on_progress && !on_progress(progress) && r.finish_reason.empty()) r.finish_reason = "cancelled";
      if (!r.finish_reason.empty()) break;
      model_->forward(std::span(history).last(1), static_cast<int64_t>(history.size()) - 1, false, logits_);
    }
    r.stats.decode_ms = ms_since(t_decode);
    r.text = std::string(stops.text());
    r.stats.completion_tokens = static_cast<int32_t>(r.tokens.size());
    r.stats.prefill_tok_s = r.stats.prefill_ms > 0 ? n_fill * 1000.0 / r.stats.prefill_ms : 0;
    const size_t decoded = r.tokens.size() - n_resume;
    r.stats.decode_tok_s = r.stats.decode_ms > 0 && decoded > 0 ? decoded * 1000.0 / r.stats.decode_ms : 0;
    r.stats.peak_rss_bytes = peak_rss_bytes();
    return r;
  }

 private:
  std::unique_ptr<Model> model_;
  ModelSummary summary_;
  double load_ms_ = 0;
  std::vector<float> logits_;
};

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string& gguf_path, const EngineOptions& opts) {
  return std::make_unique<EngineImpl>(gguf_path, opts);
}

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace ns
