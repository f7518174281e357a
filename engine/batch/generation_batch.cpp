#include "engine/batch/generation_batch.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "engine/batch/batch_sequence.h"
#include "engine/batch/request_accounting.h"

namespace ns {

using Phase = BatchSequence::Phase;

GenerationBatch::GenerationBatch(Model& model) : model_(model), prefixes_(model) {
  slots_.resize(static_cast<size_t>(model.n_seq()));
  batch_.reserve(static_cast<size_t>(model.max_batch_tokens()));
  batch_owner_.reserve(static_cast<size_t>(model.max_batch_tokens()));
  finishing_.reserve(slots_.size());
  step_tokens_.reserve(slots_.size());
  step_decoded_.reserve(slots_.size());
}

GenerationBatch::~GenerationBatch() = default;

int GenerationBatch::free_slots() const { return static_cast<int>(std::count(slots_.begin(), slots_.end(), nullptr)); }

int GenerationBatch::active() const { return static_cast<int>(slots_.size()) - free_slots(); }

int GenerationBatch::add(GenerationRequest request) {
  if (request.prompt.empty()) throw Error(ErrorKind::invalid_input, "the prompt is empty: give some text to continue");
  if (const std::string problem = request.params.validate(); !problem.empty())
    throw Error(ErrorKind::invalid_input, "sampling parameters: " + problem);
  const int64_t n_ctx = model_.n_ctx();
  const int n = request.params.n;
  if (n > static_cast<int>(slots_.size()))
    throw Error(ErrorKind::invalid_input, "n = " + std::to_string(n) + " choices, but this model decodes at most " +
                                              std::to_string(slots_.size()) +
                                              " sequences together: lower n or raise max_batch");
  const Tokenizer& tok = model_.tokenizer();
  std::vector<int32_t> prompt = tok.encode(request.prompt, /*add_special=*/true, /*parse_special=*/true);
  if (prompt.empty()) throw Error(ErrorKind::invalid_input, "the prompt tokenizes to nothing");
  const SequenceState& kv = model_.sequence_state();
  int32_t dropped = 0;
  if (request.keep_tail) {
    // Room for one sequence: the context, and each choice's share of the pool.
    const int64_t room = std::min<int64_t>(n_ctx, kv.pool_rows() / n);
    const int64_t max_tokens = std::max(1, request.params.max_tokens);
    const int64_t size = static_cast<int64_t>(prompt.size());
    if (size + max_tokens > room) {
      const int64_t keep = std::min(size, std::max(room / 2, room - max_tokens));
      const int64_t head = tok.add_bos() && prompt[0] == tok.bos() ? 1 : 0;  // the BOS stays first
      dropped = static_cast<int32_t>(size - keep);
      if (dropped > 0) prompt.erase(prompt.begin() + head, prompt.begin() + head + dropped);
    }
  }
  if (static_cast<int64_t>(prompt.size()) >= n_ctx)
    throw Error(ErrorKind::invalid_input,
                context_overflow_problem(static_cast<int64_t>(prompt.size()), n_ctx, model_.hparams().n_ctx_train));
  if (free_slots() < n) throw Error(ErrorKind::internal, "GenerationBatch::add: no free sequence slot");
  // KV rows (sequence_state.h): each choice reserves prompt + max_tokens (at
  // most the context) for its whole life. More than the pool can ever give
  // is this request's error; more than is free now waits (kNoRoom).
  const int64_t need =
      std::min<int64_t>(n_ctx, static_cast<int64_t>(prompt.size()) + std::max(1, request.params.max_tokens));
  if (need * n > kv.pool_rows())
    throw Error(ErrorKind::invalid_input,
                "the job needs " + std::to_string(need * n) + " tokens of KV cache (" +
                    (n > 1 ? std::to_string(n) + " choices x " : std::string()) + "prompt " +
                    std::to_string(prompt.size()) + " + max_tokens " + std::to_string(request.params.max_tokens) +
                    "), but this model's KV cache holds " + std::to_string(kv.pool_rows()) +
                    " tokens within memory_budget: lower max_tokens, shorten the prompt, or raise memory_budget "
                    "(`nightshift model info MODEL --memory-budget B` shows what fits)");
  if (kv.pooled() && !fits_rows(need, n)) {
    while (!fits_rows(need, n) && prefixes_.evict()) {
    }
    if (!fits_rows(need, n)) {
      refused_rows_ = need;
      return kNoRoom;
    }
  }

  // Every sequence is built before any takes a slot: a bad request leaves the batch unchanged.
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int k = 1; k < n; ++k) {
    GenerationRequest choice;
    choice.prompt = request.prompt;
    choice.params = request.params;
    choice.params.seed = request.params.seed + static_cast<uint64_t>(k);
    choice.on_progress = request.on_progress;
    if (static_cast<size_t>(k - 1) < request.resume_more.size()) {
      choice.resume = std::move(request.resume_more[static_cast<size_t>(k - 1)].tokens);
      choice.resume_logprobs = std::move(request.resume_more[static_cast<size_t>(k - 1)].logprobs);
    }
    seqs.push_back(std::make_unique<Sequence>(std::move(choice), prompt, model_, grammars_));
  }
  request.resume_more.clear();
  seqs.insert(seqs.begin(), std::make_unique<Sequence>(std::move(request), prompt, model_, grammars_));
  seqs.front()->result.prompt_tokens_dropped = dropped;

  const int handle = next_handle_++;
  std::shared_ptr<ChoiceGroup> group;
  if (n > 1) {
    group = std::make_shared<ChoiceGroup>();
    group->handle = handle;
    group->remaining = n;
    group->results.resize(static_cast<size_t>(n));
    for (const auto& s : seqs) group->choices.push_back(&s->result);
    group->progress.prompt_tokens = static_cast<int32_t>(prompt.size());
  }
  Sequence& leader = *seqs.front();
  for (int k = 0; k < n; ++k) {
    Sequence& s = *seqs[static_cast<size_t>(k)];
    s.handle = handle;
    s.group = group;
    s.choice = k;
    s.phase = k > 0 ? Phase::waiting_leader : Phase::prefilling;
    auto it = std::find(slots_.begin(), slots_.end(), nullptr);
    s.seq = static_cast<int32_t>(it - slots_.begin());
    if (!model_.reserve_rows(s.seq, s.rows))  // fits_rows() said it would
      throw Error(ErrorKind::internal, "GenerationBatch::add: the KV pool refused a reservation it had room for");
    *it = std::move(seqs[static_cast<size_t>(k)]);
  }
  refused_rows_ = 0;
  if (prefix_sharing()) plan_prefix(leader);
  return handle;
}

// The joining leader s's longest shared part, against the batch's other requests.
void GenerationBatch::plan_prefix(Sequence& s) {
  std::vector<PrefixCache::User> others;
  std::vector<Sequence*> who;
  for (auto& slot : slots_) {
    if (!slot || slot.get() == &s || slot->choice != 0) continue;
    const Sequence& o = *slot;
    others.push_back({o.prompt(), o.fed, o.phase == Phase::decoding, o.use_prefix, o.make_prefix, o.seq});
    who.push_back(slot.get());
  }
  const PrefixCache::Plan plan = prefixes_.plan(s.prompt(), others);
  if (plan.make >= 0) (plan.maker < 0 ? s : *who[static_cast<size_t>(plan.maker)]).make_prefix = plan.make;
  if (plan.use < 0) return;
  s.use_prefix = plan.use;
  s.phase = Phase::waiting_prefix;
}

void GenerationBatch::drop_prefix(int e) {
  prefixes_.drop(e);
  for (auto& slot : slots_)
    if (slot && slot->use_prefix == e) {
      slot->use_prefix = -1;
      slot->phase = Phase::prefilling;
    }
}

void GenerationBatch::copy_prefixes() {
  for (auto& slot : slots_) {
    if (!slot || slot->phase != Phase::waiting_prefix || !prefixes_.ready(slot->use_prefix)) continue;
    Sequence& s = *slot;
    s.fed = prefixes_.copy(s.use_prefix, s.seq);
    s.result.stats.prefix_tokens = static_cast<uint64_t>(s.fed);
    prefix_copied_ += s.fed;
    s.use_prefix = -1;
    s.phase = Phase::prefilling;
  }
}

// Whether n ranges of `need` rows fit the pool's free ranges now (first fit, as reserve() does).
bool GenerationBatch::fits_rows(int64_t need, int n) const {
  std::vector<int64_t> free = model_.sequence_state().free_ranges();
  for (int k = 0; k < n; ++k) {
    auto it = std::find_if(free.begin(), free.end(), [&](int64_t len) { return len >= need; });
    if (it == free.end()) return false;
    *it -= need;
  }
  return true;
}

int64_t GenerationBatch::largest_free_rows() const { return model_.sequence_state().largest_free(); }

void GenerationBatch::finish(Sequence& s, const char* reason) {
  if (s.make_prefix >= 0) drop_prefix(s.make_prefix);  // it never reached the snapshot's end
  if (s.use_prefix >= 0) prefixes_.leave(s.use_prefix);
  GenerationResult& r = s.result;
  if (r.finish_reason.empty()) r.finish_reason = reason;
  s.share.fill(r.stats, s.phase == Phase::decoding, s.n_fill, r.tokens.size() - s.n_resume);
  r.text = std::string(s.stops->text());
  r.stats.completion_tokens = static_cast<int32_t>(r.tokens.size());
  r.stats.kv_bytes_per_token = model_.sequence_state().bytes_per_token();
  model_.release_rows(s.seq);
  const int handle = s.handle;
  const std::shared_ptr<ChoiceGroup> group = s.group;
  GenerationResult out;
  if (!group)
    out = std::move(r);
  else if (group->add(s.choice, std::move(r), s.share.read_busy_s))
    out = group->take_result();
  slots_[static_cast<size_t>(s.seq)].reset();
  if (group && group->remaining > 0) return;
  add_pieces(out, model_.tokenizer());
  finished_.emplace_back(handle, std::move(out));
}

bool GenerationBatch::step() {
  // A request's first report comes before its first prompt chunk (prefilled
  // 0): a long first chunk is not silent. Choices after the first wait for it.
  for (auto& slot : slots_)
    if (slot && !slot->announced) {
      slot->announced = true;
      if (slot->phase != Phase::waiting_leader && !slot->report()) finish(*slot, "cancelled");
    }
  for (auto& slot : slots_)
    if (slot && slot->group && slot->group->cancelled) finish(*slot, "cancelled");
  copy_prefixes();
  // Decoding sequences first (one token each), then prompt chunks fill what is left.
  batch_.clear();
  batch_owner_.clear();
  const size_t cap = static_cast<size_t>(model_.max_batch_tokens());
  for (auto& slot : slots_)
    if (slot && slot->phase == Phase::decoding) {
      Sequence& s = *slot;
      batch_.push_back({s.history.back(), s.seq, static_cast<int32_t>(s.fed), true});
      batch_owner_.push_back(&s);
    }
  for (auto& slot : slots_) {
    if (!slot || slot->phase != Phase::prefilling) continue;
    Sequence& s = *slot;
    // A leader stops at the end of its prompt until the other choices have
    // its state; a snapshot's producer at the snapshot's end.
    const bool sharing = s.group && !s.group->shared;
    const int64_t last = sharing ? s.n_prompt : s.n_fill;  // its logits row comes back there
    int64_t end = last;
    if (s.make_prefix >= 0) end = std::min(end, prefixes_.len(s.make_prefix));
    for (int64_t pos = s.fed; pos < end && batch_.size() < cap; ++pos) {
      batch_.push_back({s.history[static_cast<size_t>(pos)], s.seq, static_cast<int32_t>(pos), pos + 1 == last});
      batch_owner_.push_back(&s);
    }
  }
  if (batch_.empty()) return active() > 0;

  const StepMeter meter(model_);
  BatchStepStats st;
  step_tokens_.assign(slots_.size(), 0);
  step_decoded_.assign(slots_.size(), 0);
  for (size_t i = 0; i < batch_.size(); ++i) {
    const Sequence& s = *batch_owner_[i];
    st.sequences += step_tokens_[static_cast<size_t>(s.seq)]++ == 0;
    st.keys += int64_t{batch_[i].pos} + 1;
    if (s.phase == Phase::decoding) {
      ++st.decode_tokens;
      ++step_decoded_[static_cast<size_t>(s.seq)];
    } else {
      ++st.prefill_tokens;
    }
  }
  st.tokens = static_cast<int32_t>(batch_.size());
  st.prefix_tokens = static_cast<int32_t>(prefix_copied_);
  prefix_copied_ = 0;

  model_.forward_batch(batch_, logits_);

  // Advance every sequence that took part; sample where logits came back.
  const size_t n_vocab = static_cast<size_t>(model_.n_vocab());
  size_t row = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    Sequence& s = *batch_owner_[i];
    ++s.fed;
    if (s.make_prefix >= 0 && s.fed == prefixes_.len(s.make_prefix)) {  // its state now is the snapshot
      prefixes_.snapshot(s.make_prefix, s.seq);
      s.make_prefix = -1;
    }
    if (!batch_[i].logits) continue;
    float* lg = &logits_[row++ * n_vocab];
    if (s.group && !s.group->shared) {
      share_prompt(s, lg, st);
      if (s.fed < s.n_fill) continue;  // the leader replays its own checkpoint first
    }
    take_row(s, lg, st);
  }
  meter.measure(st);  // the step's figures, shared among its sequences before any of them leaves
  last_step_ = st;
  totals_.add(st);
  step_shares_.assign(slots_.size(), nullptr);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i]) step_shares_[i] = &slots_[i]->share;
  attribute(st, step_shares_, step_tokens_, step_decoded_);
  for (auto& [seq, reason] : finishing_) finish(*seq, reason);
  finishing_.clear();
  while (refused_rows_ > 0 && prefixes_.evict()) {  // a request waits for rows: idle snapshots give theirs
  }
  // Prefill progress for sequences still filling their prompt.
  for (auto& slot : slots_)
    if (slot && (slot->phase == Phase::prefilling || slot->phase == Phase::waiting_prefix) && slot->req.on_progress) {
      slot->progress.prefilled = static_cast<int32_t>(std::min(slot->fed, slot->n_prompt));
      if (!slot->report()) finish(*slot, "cancelled");
    }
  // A choice cancelled cancels its siblings.
  for (auto& slot : slots_)
    if (slot && slot->group && slot->group->cancelled) finish(*slot, "cancelled");
  return active() > 0;
}

// The leader's prompt is in the cache: its state goes into every waiting
// choice's slot, and those that replay nothing sample from a copy of its row
// (before the leader's own sampler edits it).
void GenerationBatch::share_prompt(Sequence& leader, const float* logits, BatchStepStats& st) {
  ChoiceGroup& g = *leader.group;
  g.shared = true;
  const size_t n_vocab = static_cast<size_t>(model_.n_vocab());
  for (auto& slot : slots_) {
    if (!slot || slot->group.get() != &g || slot->phase != Phase::waiting_leader) continue;
    Sequence& s = *slot;
    model_.copy_sequence(leader.seq, s.seq, leader.n_prompt);
    s.phase = Phase::prefilling;
    s.fed = leader.n_prompt;
    if (s.fed < s.n_fill) continue;  // it replays its checkpoint from here
    row_copy_.assign(logits, logits + n_vocab);
    take_row(s, row_copy_.data(), st);
  }
}

// A sequence's logits row came back: its prefill is complete or it decodes.
void GenerationBatch::take_row(Sequence& s, float* lg, BatchStepStats& st) {
  GenerationProgress& p = s.progress;
  if (s.phase != Phase::decoding) {  // prefill just completed
    s.phase = Phase::decoding;
    s.share.t_decode = RequestShare::Clock::now();
    p.prefilled = static_cast<int32_t>(s.n_prompt);
    p.generated = static_cast<int32_t>(s.result.tokens.size());
    if (s.stops->stopped() || (s.matcher && !s.matcher->can_continue())) {
      finishing_.emplace_back(&s, "stop");
      return;
    }
    if (!s.report()) {
      finishing_.emplace_back(&s, "cancelled");
      return;
    }
  }
  bool accepted = false;
  const char* reason = s.sample(lg, model_, grammars_, accepted);
  if (accepted) {
    ++st.generated;
    if (!s.report() && !reason) reason = "cancelled";
  }
  if (reason) finishing_.emplace_back(&s, reason);
}

std::vector<std::pair<int, GenerationResult>> GenerationBatch::take_finished() {
  std::vector<std::pair<int, GenerationResult>> out;
  out.swap(finished_);
  return out;
}

std::vector<GenerationResult> GenerationBatch::run_all(Model& model, std::vector<GenerationRequest> requests,
                                                       bool prefix_sharing, BatchRunStats* totals) {
  GenerationBatch batch(model);
  batch.set_prefix_sharing(prefix_sharing);
  std::vector<GenerationResult> results(requests.size());
  std::vector<int> handle_to_index;
  size_t next = 0;
  for (;;) {
    while (next < requests.size() && (batch.free_slots() >= requests[next].params.n || batch.active() == 0)) {
      const int h = batch.add(requests[next]);  // a copy: kNoRoom keeps it for a later step
      if (h == kNoRoom) break;
      if (static_cast<size_t>(h) >= handle_to_index.size()) handle_to_index.resize(static_cast<size_t>(h) + 1);
      handle_to_index[static_cast<size_t>(h)] = static_cast<int>(next++);
    }
    const bool more = batch.step();
    for (auto& [h, r] : batch.take_finished())
      results[static_cast<size_t>(handle_to_index[static_cast<size_t>(h)])] = std::move(r);
    if (!more && next == requests.size()) break;
  }
  if (totals) *totals = batch.totals();
  return results;
}

}  // namespace ns
