#include "engine/generation_batch.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <unordered_map>

#include "engine/grammar/matcher.h"
#include "engine/process_stats.h"
#include "common/error.h"

namespace ns {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// FNV-1a over token ids: the key of a prefix snapshot (its tokens are compared too).
uint64_t token_hash(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t t : tokens)
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(t) >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return h;
}

}  // namespace

struct GenerationBatch::Prefix {
  std::vector<int32_t> tokens;    // the prompt prefix it holds; empty: free
  uint64_t hash = 0;              // token_hash(tokens)
  int32_t seq = 0;                // its spare sequence in the model's state
  Sequence* producer = nullptr;   // whose prefill is making it; null once ready
  int waiters = 0;                // requests that will copy it (they keep it from eviction)
  uint64_t used = 0;              // last use, for LRU eviction
  bool ready() const { return !tokens.empty() && producer == nullptr; }
  int64_t len() const { return static_cast<int64_t>(tokens.size()); }
};

struct GenerationBatch::Grammars {
  struct Entry {
    grammar::Grammar g;
    grammar::MaskCache cache;
  };
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Entry>>> by_hash;
  std::shared_ptr<const grammar::TokenTrie> trie;  // built at the first grammar

  size_t count = 0;

  std::shared_ptr<Entry> get(const std::string& text) {
    const uint64_t h = grammar::text_hash(text);
    if (const auto it = by_hash.find(h); it != by_hash.end())
      for (const auto& e : it->second)
        if (e->g.source == text) return e;
    auto e = std::make_shared<Entry>(Entry{grammar::parse_gbnf(text), grammar::MaskCache()});
    if (count >= kKept) forget_unused();
    by_hash[h].push_back(e);
    ++count;
    return e;
  }

 private:
  static constexpr size_t kKept = 16;  // grammars (with their mask caches) kept once no request uses them
  void forget_unused() {
    for (auto it = by_hash.begin(); it != by_hash.end();) {
      auto& bucket = it->second;
      const size_t before = bucket.size();
      std::erase_if(bucket, [](const std::shared_ptr<Entry>& e) { return e.use_count() == 1; });
      count -= before - bucket.size();
      it = bucket.empty() ? by_hash.erase(it) : std::next(it);
    }
  }
};

struct GenerationBatch::Group {
  int handle = 0;
  int remaining = 0;                             // choices still running
  bool shared = false;                           // the prompt's state is in every choice's slot
  bool cancelled = false;
  std::vector<GenerationResult> results;         // [choice], filled as each finishes
  std::vector<const GenerationChoice*> choices;  // [choice]: the live result, then results[k]
  GenerationProgress progress;                   // what on_progress sees (sums over the choices)
  double read_busy_s = 0;                        // summed over the finished choices
};

struct GenerationBatch::Sequence {
  int handle = 0;
  std::shared_ptr<Group> group;   // n > 1; else null
  int choice = 0;
  bool waiting = false;           // choice > 0 until the leader's prompt state is copied in
  std::optional<sampler::LogprobRecorder> recorder;  // params.logprobs
  std::shared_ptr<Grammars::Entry> grammar;  // constrained decoding, else null
  std::optional<grammar::Matcher> matcher;
  const GenerationChoice* self = nullptr;  // &result, for progress.choices (n = 1)
  int32_t seq = 0;
  GenerationRequest req;
  std::vector<int32_t> history;   // prompt + completion (+ replayed checkpoint)
  int64_t n_prompt = 0;
  int64_t fed = 0;                // tokens of history already in the KV cache
  int64_t n_fill = 0;             // history length before decoding starts (prompt + replay)
  int64_t rows = 0;               // KV rows it reserved: prompt + max_tokens, at most n_ctx
  size_t n_resume = 0;
  std::optional<sampler::Sampler> sampler;
  std::optional<sampler::StopMatcher> stops;
  GenerationResult result;
  GenerationProgress progress;
  Clock::time_point t_start, t_decode;
  bool decoding = false;
  bool announced = false;         // its first report (prefilled 0) is made
  int use_prefix = -1;            // a snapshot to copy before its prefill goes on (it waits for it)
  int make_prefix = -1;           // a snapshot its prefill stops at and fills
  // This request's share of the steps it took part in (see the header).
  uint64_t bytes = 0;
  double io_wait_s = 0, compute_s = 0, read_busy_s = 0;
  double decode_share_s = 0;      // of the steps that decoded (GenerationStats::decode_share_ms)
  uint64_t hits = 0, lookups = 0, prefetch_reads = 0, prefetch_used = 0;
  int32_t steps = 0;
  int64_t batch_sum = 0;  // sequences in each of its steps, summed
};

struct GenerationBatch::StepMark {
  Clock::time_point t;
  stream::StreamStats stream;
  uint64_t experts_routed = 0;
  uint64_t disk_bytes = 0;  // without a reader (io_mode mmap): what page faults read
};

GenerationBatch::GenerationBatch(Model& model) : model_(model) {
  slots_.resize(static_cast<size_t>(model.n_seq()));
  batch_.reserve(static_cast<size_t>(model.max_batch()));
  batch_owner_.reserve(static_cast<size_t>(model.max_batch()));
  finishing_.reserve(slots_.size());
  step_tokens_.reserve(slots_.size());
  step_decoded_.reserve(slots_.size());
  prefixes_.resize(static_cast<size_t>(model.prefix_slots()));
  for (size_t e = 0; e < prefixes_.size(); ++e) prefixes_[e].seq = static_cast<int32_t>(model.n_seq() + static_cast<int64_t>(e));
}

// The snapshots' rows go back to the pool (the next batch on this model starts empty).
GenerationBatch::~GenerationBatch() {
  for (const Prefix& p : prefixes_)
    if (!p.tokens.empty()) model_.release_rows(p.seq);
}

int GenerationBatch::free_slots() const {
  return static_cast<int>(std::count(slots_.begin(), slots_.end(), nullptr));
}

int GenerationBatch::active() const { return static_cast<int>(slots_.size()) - free_slots(); }

std::unique_ptr<GenerationBatch::Sequence> GenerationBatch::make_sequence(GenerationRequest request,
                                                                           std::span<const int32_t> prompt) {
  auto s = std::make_unique<Sequence>();
  const int64_t n_vocab = model_.n_vocab(), n_ctx = model_.n_ctx();
  s->sampler.emplace(request.params, static_cast<int32_t>(n_vocab));
  s->stops.emplace(request.params.stop, 4096);
  if (request.params.logprobs) s->recorder.emplace(request.params.top_logprobs, static_cast<int32_t>(n_vocab));
  const Tokenizer& tok = model_.tokenizer();
  if (!request.params.grammar.empty()) {
    if (!grammars_) grammars_ = std::make_unique<Grammars>();
    s->grammar = grammars_->get(request.params.grammar);
    if (!grammars_->trie) grammars_->trie = grammar::TokenTrie::from_tokenizer(tok);
    s->matcher.emplace(s->grammar->g);
  }
  s->history.assign(prompt.begin(), prompt.end());
  s->n_prompt = static_cast<int64_t>(s->history.size());
  for (const int32_t id : request.resume)
    if (id < 0 || id >= n_vocab)
      throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(id) + " is outside the vocabulary");
  s->rows = std::min<int64_t>(n_ctx, s->n_prompt + std::max(1, request.params.max_tokens));
  s->history.reserve(static_cast<size_t>(s->rows));
  s->result.tokens.reserve(static_cast<size_t>(request.params.max_tokens));
  s->result.stats.prompt_tokens = static_cast<int32_t>(s->n_prompt);
  s->progress.prompt_tokens = s->result.stats.prompt_tokens;
  s->progress.tokens = &s->result.tokens;
  s->self = &s->result;
  s->progress.choices = {&s->self, 1};

  // A resumed request replays its checkpointed tokens as part of the prefill,
  // and its random stream skips the draws they took. With logprobs, only as
  // far as the checkpoint holds their records.
  size_t replay = std::min(request.resume.size(), static_cast<size_t>(std::max(0, request.params.max_tokens - 1)));
  if (s->recorder) {
    s->result.logprobs.k = s->recorder->k();
    const sampler::ChoiceLogprobs& saved = request.resume_logprobs;
    replay = saved.k == s->recorder->k() ? std::min(replay, saved.tokens()) : 0;
  }
  for (size_t i = 0; i < replay && static_cast<int64_t>(s->history.size()) < n_ctx - 1; ++i) {
    if (s->matcher && !s->matcher->accept_bytes(tok.token_to_piece(request.resume[i])))
      throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(i) +
                                                " does not follow the job's grammar: delete the job's checkpoint "
                                                "and it starts over");
    s->history.push_back(request.resume[i]);
    s->result.tokens.push_back(request.resume[i]);
    s->stops->feed(tok.token_to_piece(request.resume[i]));
  }
  s->n_resume = s->result.tokens.size();
  if (s->recorder) {
    s->result.logprobs.entries = request.resume_logprobs.entries;
    s->result.logprobs.truncate(s->n_resume);
  }
  s->sampler->skip_draws(s->n_resume);
  s->n_fill = static_cast<int64_t>(s->history.size());
  s->req = std::move(request);
  s->t_start = Clock::now();
  return s;
}

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
  const int64_t need = std::min<int64_t>(n_ctx, static_cast<int64_t>(prompt.size()) + std::max(1, request.params.max_tokens));
  if (need * n > kv.pool_rows())
    throw Error(ErrorKind::invalid_input,
                "the job needs " + std::to_string(need * n) + " tokens of KV cache (" +
                    (n > 1 ? std::to_string(n) + " choices x " : std::string()) + "prompt " +
                    std::to_string(prompt.size()) + " + max_tokens " + std::to_string(request.params.max_tokens) +
                    "), but this model's KV cache holds " + std::to_string(kv.pool_rows()) +
                    " tokens within memory_budget: lower max_tokens, shorten the prompt, or raise memory_budget "
                    "(`nightshift model info MODEL --memory-budget B` shows what fits)");
  if (kv.pooled() && !fits_rows(need, n)) {
    while (!fits_rows(need, n) && evict_prefix(-1)) {
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
    seqs.push_back(make_sequence(std::move(choice), prompt));
  }
  request.resume_more.clear();
  seqs.insert(seqs.begin(), make_sequence(std::move(request), prompt));
  seqs.front()->result.prompt_tokens_dropped = dropped;

  const int handle = next_handle_++;
  std::shared_ptr<Group> group;
  if (n > 1) {
    group = std::make_shared<Group>();
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
    s.waiting = k > 0;
    auto it = std::find(slots_.begin(), slots_.end(), nullptr);
    s.seq = static_cast<int32_t>(it - slots_.begin());
    if (!model_.reserve_rows(s.seq, s.rows))  // fits_rows() said it would
      throw Error(ErrorKind::internal, "GenerationBatch::add: the KV pool refused a reservation it had room for");
    *it = std::move(seqs[static_cast<size_t>(k)]);
  }
  refused_rows_ = 0;
  if (sharing_ && !prefixes_.empty()) plan_prefix(leader);
  return handle;
}

// Where the joining request s (a leader: choice 0) finds its prompt's
// longest shared part (the header's "Prefix sharing").
void GenerationBatch::plan_prefix(Sequence& s) {
  const int64_t limit = (s.n_prompt - 1) / kPrefixBlock * kPrefixBlock;  // its last prompt token is computed
  if (limit < kPrefixMin) return;
  const std::span<const int32_t> prompt(s.history.data(), static_cast<size_t>(s.n_prompt));
  // A snapshot (ready or under way) that begins its prompt.
  int best = -1;
  for (size_t e = 0; e < prefixes_.size(); ++e) {
    const Prefix& p = prefixes_[e];
    if (p.tokens.empty() || p.len() > limit || (best >= 0 && p.len() <= prefixes_[static_cast<size_t>(best)].len()))
      continue;
    if (p.hash == token_hash(prompt.first(p.tokens.size())) &&
        std::equal(p.tokens.begin(), p.tokens.end(), prompt.begin()))
      best = static_cast<int>(e);
  }
  if (best >= 0) ++prefixes_[static_cast<size_t>(best)].waiters;  // kept while a longer one is sought
  const int64_t have = best >= 0 ? prefixes_[static_cast<size_t>(best)].len() : 0;
  // The longest common start with another request's prompt.
  Sequence* other = nullptr;
  int64_t common = 0;
  for (auto& slot : slots_) {
    if (!slot || slot.get() == &s || slot->choice != 0) continue;
    const int64_t n = std::min(limit, slot->n_prompt);
    const auto diff = std::mismatch(prompt.begin(), prompt.begin() + n, slot->history.begin());
    const int64_t len = (diff.first - prompt.begin()) / kPrefixBlock * kPrefixBlock;
    if (len > common) {
      common = len;
      other = slot.get();
    }
  }
  if (common >= kPrefixMin && common > have) {
    // The other request gives the snapshot now if its state is that of
    // exactly the common part, or if the state is attention rows only (no
    // recurrent state, no sliding ring) and it has them; it makes the
    // snapshot if its prefill has not passed the common part yet (nor will
    // jump past it by a copy); else this request's own prefill makes it.
    const SequenceState& kv = model_.sequence_state();
    const bool rows_only = kv.n_recurrent_layers() == 0 && kv.n_sliding_layers() == 0;
    const int64_t other_at =
        other->use_prefix >= 0 ? std::max(other->fed, prefixes_[static_cast<size_t>(other->use_prefix)].len()) : other->fed;
    Sequence* producer = &s;
    bool now = false;
    if ((rows_only && other->fed >= common) || (!other->decoding && other->use_prefix < 0 && other->fed == common)) {
      producer = other;
      now = true;
    } else if (!other->decoding && other->make_prefix < 0 && other_at <= common) {
      producer = other;
    } else if (s.make_prefix >= 0) {
      producer = nullptr;
    }
    const int e = producer ? take_prefix(common, best) : -1;
    if (e >= 0) {
      Prefix& p = prefixes_[static_cast<size_t>(e)];
      p.tokens.assign(prompt.begin(), prompt.begin() + common);
      p.hash = token_hash(p.tokens);
      p.used = ++prefix_tick_;
      if (now) {
        model_.copy_sequence(producer->seq, p.seq, common);  // ready at once
      } else {
        p.producer = producer;
        producer->make_prefix = e;
      }
      if (producer != &s) {  // this one waits for it rather than for the shorter one
        if (best >= 0) --prefixes_[static_cast<size_t>(best)].waiters;
        best = e;
        ++p.waiters;
      }
    }
  }
  if (best < 0) return;
  s.use_prefix = best;
  prefixes_[static_cast<size_t>(best)].used = ++prefix_tick_;
}

// A free snapshot slot holding `len` rows of the pool, evicting idle ones
// (never `keep`) as needed; -1 when none can be had.
int GenerationBatch::take_prefix(int64_t len, int keep) {
  auto free = [&] {
    return std::find_if(prefixes_.begin(), prefixes_.end(), [](const Prefix& p) { return p.tokens.empty(); });
  };
  auto it = free();
  if (it == prefixes_.end() && evict_prefix(keep)) it = free();
  if (it == prefixes_.end()) return -1;
  while (!model_.reserve_rows(it->seq, len))
    if (!evict_prefix(keep)) return -1;
  return static_cast<int>(it - prefixes_.begin());
}

// Drops the least recently used snapshot that is ready and that no request waits for.
bool GenerationBatch::evict_prefix(int keep) {
  Prefix* lru = nullptr;
  for (size_t e = 0; e < prefixes_.size(); ++e) {
    Prefix& p = prefixes_[e];
    if (static_cast<int>(e) != keep && p.ready() && p.waiters == 0 && (!lru || p.used < lru->used)) lru = &p;
  }
  if (!lru) return false;
  drop_prefix(static_cast<int>(lru - prefixes_.data()));
  return true;
}

void GenerationBatch::drop_prefix(int e) {
  Prefix& p = prefixes_[static_cast<size_t>(e)];
  model_.release_rows(p.seq);
  p.tokens.clear();
  p.producer = nullptr;
  p.waiters = 0;
  for (auto& slot : slots_)  // waiters of an unfinished one prefill on their own
    if (slot && slot->use_prefix == e) slot->use_prefix = -1;
}

// s has fed exactly its snapshot's tokens: its state now is the snapshot.
void GenerationBatch::snapshot(Sequence& s) {
  Prefix& p = prefixes_[static_cast<size_t>(s.make_prefix)];
  model_.copy_sequence(s.seq, p.seq, p.len());
  p.producer = nullptr;
  s.make_prefix = -1;
}

void GenerationBatch::copy_prefixes() {
  for (auto& slot : slots_) {
    if (!slot || slot->use_prefix < 0) continue;
    Sequence& s = *slot;
    Prefix& p = prefixes_[static_cast<size_t>(s.use_prefix)];
    if (!p.ready()) continue;
    model_.copy_sequence(p.seq, s.seq, p.len());
    s.fed = p.len();
    s.result.stats.prefix_tokens = static_cast<uint64_t>(p.len());
    prefix_copied_ += p.len();
    --p.waiters;
    p.used = ++prefix_tick_;
    s.use_prefix = -1;
  }
}

void GenerationBatch::set_prefix_sharing(bool on) { sharing_ = on; }

int GenerationBatch::prefix_entries() const {
  return static_cast<int>(
      std::count_if(prefixes_.begin(), prefixes_.end(), [](const Prefix& p) { return !p.tokens.empty(); }));
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

bool GenerationBatch::report(Sequence& s) {
  if (!s.req.on_progress) return true;
  if (!s.group) return s.req.on_progress(s.progress);
  Group& g = *s.group;
  GenerationProgress& p = g.progress;
  p.prefilled = s.progress.prefilled;
  p.generated = 0;
  for (const GenerationChoice* c : g.choices) p.generated += static_cast<int32_t>(c->tokens.size());
  p.piece = s.progress.piece;
  p.tokens = &g.choices[0]->tokens;
  p.choices = g.choices;
  if (s.req.on_progress(p)) return true;
  g.cancelled = true;
  return false;
}

void GenerationBatch::finish(Sequence& s, const char* reason) {
  if (s.make_prefix >= 0) drop_prefix(s.make_prefix);  // it never reached the snapshot's end
  s.make_prefix = -1;
  if (s.use_prefix >= 0) --prefixes_[static_cast<size_t>(s.use_prefix)].waiters;
  s.use_prefix = -1;
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
  r.stats.kv_bytes_per_token = model_.sequence_state().bytes_per_token();
  r.stats.bytes_read = s.bytes;
  r.stats.read_gib_s = s.read_busy_s > 0 ? double(s.bytes) / s.read_busy_s / double(1ull << 30) : 0;
  r.stats.io_wait_ms = s.io_wait_s * 1e3;
  r.stats.compute_ms = s.compute_s * 1e3;
  r.stats.cache_hit_rate = s.lookups ? double(s.hits) / double(s.lookups) : 0;
  // A prefetch read in one step may be used in the next: the ratio is of sums, capped at 1.
  r.stats.prefetch_accuracy = s.prefetch_reads ? std::min(1.0, double(s.prefetch_used) / double(s.prefetch_reads)) : 0;
  r.stats.batch_steps = s.steps;
  r.stats.avg_batch_size = s.steps ? double(s.batch_sum) / s.steps : 0;
  r.stats.decode_share_ms = s.decode_share_s * 1e3;
  if (!s.group) {
    add_pieces(r, r);
    finished_.emplace_back(s.handle, std::move(r));
    model_.release_rows(s.seq);
    slots_[static_cast<size_t>(s.seq)].reset();
    return;
  }
  Group& g = *s.group;
  const auto k = static_cast<size_t>(s.choice);
  g.results[k] = std::move(r);
  g.choices[k] = &g.results[k];
  g.read_busy_s += s.read_busy_s;
  const std::shared_ptr<Group> keep = s.group;
  model_.release_rows(s.seq);
  slots_[static_cast<size_t>(s.seq)].reset();
  if (--g.remaining > 0) return;
  // Every choice is done: one result. The prompt counts once, the completion
  // tokens and this request's shares of the steps sum over the choices.
  GenerationResult out = std::move(g.results[0]);
  GenerationStats& st = out.stats;
  double decoded_all = st.decode_tok_s * st.decode_ms / 1000.0;  // choice 0's tokens decoded (not replayed)
  for (size_t c = 1; c < g.results.size(); ++c) {
    const GenerationResult& o = g.results[c];
    st.completion_tokens += o.stats.completion_tokens;
    st.bytes_read += o.stats.bytes_read;
    st.io_wait_ms += o.stats.io_wait_ms;
    st.compute_ms += o.stats.compute_ms;
    st.decode_share_ms += o.stats.decode_share_ms;
    st.decode_ms = std::max(st.decode_ms, o.stats.decode_ms);
    st.batch_steps = std::max(st.batch_steps, o.stats.batch_steps);
    st.peak_rss_bytes = std::max(st.peak_rss_bytes, o.stats.peak_rss_bytes);
    decoded_all += o.stats.decode_tok_s * o.stats.decode_ms / 1000.0;
    out.more_choices.push_back(std::move(static_cast<GenerationChoice&>(g.results[c])));
  }
  st.decode_tok_s = st.decode_ms > 0 ? decoded_all * 1000.0 / st.decode_ms : 0;
  st.read_gib_s = g.read_busy_s > 0 ? double(st.bytes_read) / g.read_busy_s / double(1ull << 30) : 0;
  add_pieces(out, out);
  for (const GenerationChoice& c : out.more_choices) add_pieces(c, out);
  finished_.emplace_back(g.handle, std::move(out));
}

void GenerationBatch::add_pieces(const GenerationChoice& c, GenerationResult& out) const {
  for (const sampler::TokenLogprob& e : c.logprobs.entries)
    if (!out.pieces.count(e.id)) out.pieces.emplace(e.id, model_.tokenizer().token_to_piece(e.id));
}

bool GenerationBatch::step() {
  // A request's first report comes before its first prompt chunk (prefilled
  // 0): a long first chunk is not silent. Choices after the first wait for it.
  for (auto& slot : slots_)
    if (slot && !slot->announced) {
      slot->announced = true;
      if (!slot->waiting && !report(*slot)) finish(*slot, "cancelled");
    }
  for (auto& slot : slots_)
    if (slot && slot->group && slot->group->cancelled) finish(*slot, "cancelled");
  copy_prefixes();
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
    if (!slot || slot->decoding || slot->waiting || slot->use_prefix >= 0) continue;
    Sequence& s = *slot;
    // A leader stops at the end of its prompt until the other choices have
    // its state; a snapshot's producer at the snapshot's end.
    const bool sharing = s.group && !s.group->shared;
    const int64_t last = sharing ? s.n_prompt : s.n_fill;  // its logits row comes back there
    int64_t end = last;
    if (s.make_prefix >= 0) end = std::min(end, prefixes_[static_cast<size_t>(s.make_prefix)].len());
    for (int64_t pos = s.fed; pos < end && batch_.size() < cap; ++pos) {
      batch_.push_back({s.history[static_cast<size_t>(pos)], s.seq, static_cast<int32_t>(pos), pos + 1 == last});
      batch_owner_.push_back(&s);
    }
  }
  if (batch_.empty()) return active() > 0;

  const StepMark start = mark();
  BatchStepStats st;
  step_tokens_.assign(slots_.size(), 0);
  step_decoded_.assign(slots_.size(), 0);
  for (size_t i = 0; i < batch_.size(); ++i) {
    const Sequence& s = *batch_owner_[i];
    st.sequences += step_tokens_[static_cast<size_t>(s.seq)]++ == 0;
    st.keys += int64_t{batch_[i].pos} + 1;
    if (s.decoding) {
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
    if (s.make_prefix >= 0 && s.fed == prefixes_[static_cast<size_t>(s.make_prefix)].len()) snapshot(s);
    if (!batch_[i].logits) continue;
    float* lg = &logits_[row++ * n_vocab];
    if (s.group && !s.group->shared) {
      share_prompt(s, lg, st);
      if (s.fed < s.n_fill) continue;  // the leader replays its own checkpoint first
    }
    take_row(s, lg, st);
  }
  // The step's figures, shared among its sequences before any of them leaves.
  const BatchStepStats measured = measure(start);
  st.seconds = measured.seconds;
  st.experts_used = measured.experts_used;
  st.experts_cached = measured.experts_cached;
  st.experts_read = measured.experts_read;
  st.bytes_read = measured.bytes_read;
  st.prefetch_reads = measured.prefetch_reads;
  st.prefetch_used = measured.prefetch_used;
  st.io_wait_s = measured.io_wait_s;
  st.compute_s = measured.compute_s;
  st.read_busy_s = measured.read_busy_s;
  last_step_ = st;
  totals_.add(st);
  attribute(st);
  for (auto& [seq, reason] : finishing_) finish(*seq, reason);
  finishing_.clear();
  while (refused_rows_ > 0 && evict_prefix(-1)) {  // a request waits for rows: idle snapshots give theirs
  }
  // Prefill progress for sequences still filling their prompt.
  for (auto& slot : slots_)
    if (slot && !slot->decoding && !slot->waiting && slot->req.on_progress) {
      slot->progress.prefilled = static_cast<int32_t>(std::min(slot->fed, slot->n_prompt));
      if (!report(*slot)) finish(*slot, "cancelled");
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
  Group& g = *leader.group;
  g.shared = true;
  const size_t n_vocab = static_cast<size_t>(model_.n_vocab());
  for (auto& slot : slots_) {
    if (!slot || slot->group.get() != &g || !slot->waiting) continue;
    Sequence& s = *slot;
    model_.copy_sequence(leader.seq, s.seq, leader.n_prompt);
    s.waiting = false;
    s.fed = leader.n_prompt;
    if (s.fed < s.n_fill) continue;  // it replays its checkpoint from here
    row_copy_.assign(logits, logits + n_vocab);
    take_row(s, row_copy_.data(), st);
  }
}

// A sequence's logits row came back: its prefill is complete or it decodes.
void GenerationBatch::take_row(Sequence& s, float* lg, BatchStepStats& st) {
  const int64_t n_vocab = model_.n_vocab(), n_ctx = model_.n_ctx();
  const Tokenizer& tok = model_.tokenizer();
  GenerationProgress& p = s.progress;
  if (!s.decoding) {  // prefill just completed
    s.decoding = true;
    s.t_decode = Clock::now();
    p.prefilled = static_cast<int32_t>(s.n_prompt);
    p.generated = static_cast<int32_t>(s.result.tokens.size());
    if (s.stops->stopped() || (s.matcher && !s.matcher->can_continue())) {
      finishing_.emplace_back(&s, "stop");
      return;
    }
    if (!report(s)) {
      finishing_.emplace_back(&s, "cancelled");
      return;
    }
  }
  // Logprobs are of the raw row (engine/sampler/logprobs.h); the grammar's mask comes after.
  if (s.recorder) s.recorder->observe({lg, static_cast<size_t>(n_vocab)});
  if (s.matcher && !constrain(s, lg, n_vocab)) {
    finishing_.emplace_back(&s, "error");
    return;
  }
  const int32_t id = s.sampler->sample({lg, static_cast<size_t>(n_vocab)}, s.history);
  if (!s.req.params.ignore_eos && tok.is_end_of_generation(id)) {
    finishing_.emplace_back(&s, "stop");
    return;
  }
  ++st.generated;
  s.history.push_back(id);
  s.result.tokens.push_back(id);
  if (s.recorder) s.recorder->append(id, s.result.logprobs);
  p.generated = static_cast<int32_t>(s.result.tokens.size());
  p.piece = tok.token_to_piece(id);
  if (s.matcher && !s.matcher->accept_bytes(p.piece))
    throw Error(ErrorKind::internal, "token " + std::to_string(id) + " was sampled against its grammar's mask");
  const char* reason = nullptr;
  if (s.stops->feed(p.piece) || (s.matcher && !s.matcher->can_continue())) reason = "stop";
  else if (p.generated >= s.req.params.max_tokens || static_cast<int64_t>(s.history.size()) >= std::min(n_ctx, s.rows))
    reason = "length";
  if (!report(s) && !reason) reason = "cancelled";
  if (reason) finishing_.emplace_back(&s, reason);
}

// Masks the logits of the tokens the sequence's grammar forbids; false when it allows none.
bool GenerationBatch::constrain(Sequence& s, float* logits, int64_t n_vocab) {
  const auto t0 = Clock::now();
  const grammar::TokenTrie& trie = *grammars_->trie;
  const grammar::TokenMask& mask = s.grammar->cache.mask(*s.matcher, trie);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const int64_t n_mask = trie.n_vocab();  // the output may have rows past the tokenizer's tokens
  bool any = false;
  const int64_t n = std::min(n_mask, n_vocab);
  for (size_t w = 0; w < mask.size(); ++w) {
    const uint64_t bits = mask[w];
    const int64_t base = static_cast<int64_t>(w) * 64, end = std::min<int64_t>(base + 64, n);
    if (bits == 0) {  // whole words forbidden (most of them outside strings): one fill
      if (base < end) std::fill(logits + base, logits + end, kMasked);
      continue;
    }
    any = true;
    for (uint64_t off = ~bits; off != 0; off &= off - 1) {  // each forbidden token of the word
      const int64_t id = base + std::countr_zero(off);
      if (id < end) logits[id] = kMasked;
    }
  }
  for (int64_t id = n_mask; id < n_vocab; ++id) logits[id] = kMasked;
  grammar_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  if (!any)
    s.result.error = "no token of the vocabulary can continue the output under its grammar (after " +
                     std::to_string(s.result.tokens.size()) + " tokens); the grammar needs text this model cannot write";
  return any;
}

GenerationBatch::StepMark GenerationBatch::mark() const {
  StepMark m;
  m.t = Clock::now();
  m.experts_routed = model_.experts_routed();
  if (model_.streaming().reader) m.stream = model_.stream_stats();
  else m.disk_bytes = process_read_bytes();
  return m;
}

BatchStepStats GenerationBatch::measure(const StepMark& start) const {
  BatchStepStats st;
  st.seconds = std::chrono::duration<double>(Clock::now() - start.t).count();
  st.experts_used = static_cast<uint32_t>(model_.experts_routed() - start.experts_routed);
  if (model_.streaming().reader) {
    const stream::StreamStats d = model_.stream_stats() - start.stream;
    // A hit on an expert a prefetch read during this step came from the disk too.
    const uint64_t prefetched = std::min(d.cache.prefetch_used, d.cache.hits);
    st.experts_cached = static_cast<uint32_t>(d.cache.hits - prefetched);
    st.experts_read = static_cast<uint32_t>(d.cache.misses + prefetched);
    st.bytes_read = d.reader.bytes_read;
    st.prefetch_reads = d.cache.prefetch_reads;
    st.prefetch_used = d.cache.prefetch_used;
    st.io_wait_s = double(d.cache.io_wait_ns) * 1e-9;
    st.read_busy_s = double(d.reader.busy_ns) * 1e-9;
  } else {
    const uint64_t now = process_read_bytes();
    st.bytes_read = now > start.disk_bytes ? now - start.disk_bytes : 0;
  }
  st.compute_s = std::max(0.0, st.seconds - st.io_wait_s);
  return st;
}

void GenerationBatch::attribute(const BatchStepStats& st) {
  if (st.tokens <= 0) return;
  // Whole bytes in proportion to tokens; the remainder one byte each to the
  // first sequences, so the shares sum to the step's bytes exactly.
  uint64_t given = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (step_tokens_[i] == 0 || !slots_[i]) continue;
    Sequence& s = *slots_[i];
    const double share = double(step_tokens_[i]) / double(st.tokens);
    const uint64_t bytes = static_cast<uint64_t>((static_cast<unsigned __int128>(st.bytes_read) * static_cast<uint64_t>(step_tokens_[i])) /
                                                 static_cast<uint64_t>(st.tokens));
    s.bytes += bytes;
    given += bytes;
    s.io_wait_s += share * st.io_wait_s;
    s.compute_s += share * st.compute_s;
    s.read_busy_s += share * st.read_busy_s;
    if (st.decode_tokens > 0) s.decode_share_s += st.seconds * step_decoded_[i] / st.decode_tokens;
    s.hits += st.experts_cached;
    s.lookups += st.experts_cached + st.experts_read;
    s.prefetch_reads += st.prefetch_reads;
    s.prefetch_used += st.prefetch_used;
    ++s.steps;
    s.batch_sum += st.sequences;
  }
  for (size_t i = 0; i < slots_.size() && given < st.bytes_read; ++i)
    if (step_tokens_[i] > 0 && slots_[i]) {
      ++slots_[i]->bytes;
      ++given;
    }
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
    for (auto& [h, r] : batch.take_finished()) results[static_cast<size_t>(handle_to_index[static_cast<size_t>(h)])] = std::move(r);
    if (!more && next == requests.size()) break;
  }
  if (totals) *totals = batch.totals();
  return results;
}

}  // namespace ns
