#include "engine/generation_batch.h"

#include <algorithm>

#include "engine/util/error.h"

namespace ns {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct GenerationBatch::Sequence {
  int handle = 0;
  int32_t seq = 0;
  GenerationRequest req;
  std::vector<int32_t> history;   // prompt + completion (+ replayed checkpoint)
  int64_t n_prompt = 0;
  int64_t fed = 0;                // tokens of history already in the KV cache
  int64_t n_fill = 0;             // history length before decoding starts (prompt + replay)
  size_t n_resume = 0;
  std::optional<sampler::Sampler> sampler;
  std::optional<sampler::StopMatcher> stops;
  GenerationResult result;
  GenerationProgress progress;
  Clock::time_point t_start, t_decode;
  bool decoding = false;
};

GenerationBatch::GenerationBatch(Model& model) : model_(model) {
  slots_.resize(static_cast<size_t>(model.n_seq()));
  batch_.reserve(static_cast<size_t>(model.max_batch()));
  batch_owner_.reserve(static_cast<size_t>(model.max_batch()));
}

GenerationBatch::~GenerationBatch() = default;

int GenerationBatch::free_slots() const {
  return static_cast<int>(std::count(slots_.begin(), slots_.end(), nullptr));
}

int GenerationBatch::active() const { return static_cast<int>(slots_.size()) - free_slots(); }

int GenerationBatch::add(GenerationRequest request) {
  if (request.prompt.empty()) throw Error(ErrorKind::invalid_input, "the prompt is empty: give some text to continue");
  auto s = std::make_unique<Sequence>();
  const int64_t n_vocab = model_.n_vocab(), n_ctx = model_.n_ctx();
  s->sampler.emplace(request.params, static_cast<int32_t>(n_vocab));
  s->stops.emplace(request.params.stop, 4096);
  const Tokenizer& tok = model_.tokenizer();
  s->history = tok.encode(request.prompt, /*add_special=*/true, /*parse_special=*/true);
  s->n_prompt = static_cast<int64_t>(s->history.size());
  if (s->n_prompt == 0) throw Error(ErrorKind::invalid_input, "the prompt tokenizes to nothing");
  if (s->n_prompt >= n_ctx)
    throw Error(ErrorKind::invalid_input, "the prompt is " + std::to_string(s->n_prompt) +
                                              " tokens but the context holds " + std::to_string(n_ctx) +
                                              ": shorten the prompt or raise `context`");
  for (const int32_t id : request.resume)
    if (id < 0 || id >= n_vocab)
      throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(id) + " is outside the vocabulary");

  auto it = std::find(slots_.begin(), slots_.end(), nullptr);
  if (it == slots_.end()) throw Error(ErrorKind::internal, "GenerationBatch::add: no free sequence slot");
  s->seq = static_cast<int32_t>(it - slots_.begin());
  s->handle = next_handle_++;
  s->history.reserve(static_cast<size_t>(n_ctx));
  s->result.tokens.reserve(static_cast<size_t>(request.params.max_tokens));
  s->result.stats.prompt_tokens = static_cast<int32_t>(s->n_prompt);
  s->progress.prompt_tokens = s->result.stats.prompt_tokens;
  s->progress.tokens = &s->result.tokens;

  // A resumed request replays its checkpointed tokens as part of the prefill,
  // and its random stream skips the draws they took.
  s->n_resume = std::min(request.resume.size(), static_cast<size_t>(std::max(0, request.params.max_tokens - 1)));
  for (size_t i = 0; i < s->n_resume && static_cast<int64_t>(s->history.size()) < n_ctx - 1; ++i) {
    s->history.push_back(request.resume[i]);
    s->result.tokens.push_back(request.resume[i]);
    s->stops->feed(tok.token_to_piece(request.resume[i]));
  }
  s->n_resume = s->result.tokens.size();
  s->sampler->skip_draws(s->n_resume);
  s->n_fill = static_cast<int64_t>(s->history.size());
  s->req = std::move(request);
  s->t_start = Clock::now();
  const int handle = s->handle;
  *it = std::move(s);
  return handle;
}

void GenerationBatch::finish(Sequence& s, const char* reason) {
  const auto now = Clock::now();
  GenerationResult& r = s.result;
  if (r.finish_reason.empty()) r.finish_reason = reason;
  if (!s.decoding) s.t_decode = now;
  r.stats.prefill_ms = ms_between(s.t_start, s.t_decode);
  r.stats.decode_ms = ms_between(s.t_decode, now);
  r.text = std::string(s.stops->text());
  r.stats.completion_tokens = static_cast<int32_t>(r.tokens.size());
  r.stats.prefill_tok_s = r.stats.prefill_ms > 0 ? s.n_fill * 1000.0 / r.stats.prefill_ms : 0;
  const size_t decoded = r.tokens.size() - s.n_resume;
  r.stats.decode_tok_s = r.stats.decode_ms > 0 && decoded > 0 ? decoded * 1000.0 / r.stats.decode_ms : 0;
  r.stats.peak_rss_bytes = peak_rss_bytes();
  r.stats.kv_bytes_per_token = model_.kv_cache().bytes_per_token();
  finished_.emplace_back(s.handle, std::move(r));
  slots_[static_cast<size_t>(s.seq)].reset();
}

bool GenerationBatch::step() {
  // Decoding sequences first (one token each), then prompt chunks fill what is left.
  batch_.clear();
  batch_owner_.clear();
  const size_t cap = static_cast<size_t>(model_.max_batch());
  for (auto& slot : slots_)
    if (slot && slot->decoding) {
      Sequence& s = *slot;
      batch_.push_back({s.history.back(), s.seq, static_cast<int32_t>(s.fed), true});
      batch_owner_.push_back(&s);
    }
  for (auto& slot : slots_) {
    if (!slot || slot->decoding) continue;
    Sequence& s = *slot;
    for (int64_t pos = s.fed; pos < s.n_fill && batch_.size() < cap; ++pos) {
      batch_.push_back({s.history[static_cast<size_t>(pos)], s.seq, static_cast<int32_t>(pos), pos + 1 == s.n_fill});
      batch_owner_.push_back(&s);
    }
  }
  if (batch_.empty()) return active() > 0;

  model_.forward_batch(batch_, logits_);

  // Advance every sequence that took part; sample where logits came back.
  const int64_t n_vocab = model_.n_vocab(), n_ctx = model_.n_ctx();
  const Tokenizer& tok = model_.tokenizer();
  size_t row = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    Sequence& s = *batch_owner_[i];
    ++s.fed;
    if (!batch_[i].logits) continue;
    float* lg = &logits_[row++ * static_cast<size_t>(n_vocab)];
    GenerationProgress& p = s.progress;
    if (!s.decoding) {  // prefill just completed
      s.decoding = true;
      s.t_decode = Clock::now();
      p.prefilled = static_cast<int32_t>(s.n_prompt);
      p.generated = static_cast<int32_t>(s.result.tokens.size());
      if (s.stops->stopped()) {
        finish(s, "stop");
        continue;
      }
      if (s.req.on_progress && !s.req.on_progress(p)) {
        finish(s, "cancelled");
        continue;
      }
    }
    const int32_t id = s.sampler->sample({lg, static_cast<size_t>(n_vocab)}, s.history);
    if (!s.req.params.ignore_eos && tok.is_end_of_generation(id)) {
      finish(s, "stop");
      continue;
    }
    s.history.push_back(id);
    s.result.tokens.push_back(id);
    p.generated = static_cast<int32_t>(s.result.tokens.size());
    p.piece = tok.token_to_piece(id);
    const char* reason = nullptr;
    if (s.stops->feed(p.piece)) reason = "stop";
    else if (p.generated >= s.req.params.max_tokens || static_cast<int64_t>(s.history.size()) >= n_ctx) reason = "length";
    if (s.req.on_progress && !s.req.on_progress(p) && !reason) reason = "cancelled";
    if (reason) finish(s, reason);
  }
  // Prefill progress for sequences still filling their prompt.
  for (auto& slot : slots_)
    if (slot && !slot->decoding && slot->req.on_progress) {
      slot->progress.prefilled = static_cast<int32_t>(std::min(slot->fed, slot->n_prompt));
      if (!slot->req.on_progress(slot->progress)) finish(*slot, "cancelled");
    }
  return active() > 0;
}

std::vector<std::pair<int, GenerationResult>> GenerationBatch::take_finished() {
  std::vector<std::pair<int, GenerationResult>> out;
  out.swap(finished_);
  return out;
}

std::vector<GenerationResult> GenerationBatch::run_all(Model& model, std::vector<GenerationRequest> requests) {
  GenerationBatch batch(model);
  std::vector<GenerationResult> results(requests.size());
  std::vector<int> handle_to_index;
  size_t next = 0;
  for (;;) {
    while (next < requests.size() && batch.free_slots() > 0) {
      const int h = batch.add(std::move(requests[next]));
      if (static_cast<size_t>(h) >= handle_to_index.size()) handle_to_index.resize(static_cast<size_t>(h) + 1);
      handle_to_index[static_cast<size_t>(h)] = static_cast<int>(next++);
    }
    const bool more = batch.step();
    for (auto& [h, r] : batch.take_finished()) results[static_cast<size_t>(handle_to_index[static_cast<size_t>(h)])] = std::move(r);
    if (!more && next == requests.size()) break;
  }
  return results;
}

}  // namespace ns
