#include "engine/batch/prefix_cache.h"

#include <algorithm>

namespace ns {
namespace {

// FNV-1a over token ids: the key of an entry (its tokens are compared too).
uint64_t token_hash(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t t : tokens)
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(t) >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return h;
}

}  // namespace

PrefixCache::PrefixCache(Model& model) : model_(model) {
  entries_.resize(static_cast<size_t>(model.prefix_slots()));
  for (size_t e = 0; e < entries_.size(); ++e)
    entries_[e].seq = static_cast<int32_t>(model.n_seq() + static_cast<int64_t>(e));
}

// The next batch on this model starts empty.
PrefixCache::~PrefixCache() {
  for (const Entry& p : entries_)
    if (!p.tokens.empty()) model_.release_rows(p.seq);
}

int PrefixCache::entries() const {
  return static_cast<int>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& p) { return !p.tokens.empty(); }));
}

PrefixCache::Plan PrefixCache::plan(std::span<const int32_t> prompt, std::span<const User> others) {
  Plan plan;
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t limit = (n_prompt - 1) / kBlock * kBlock;  // its last prompt token is computed
  if (limit < kMin) return plan;
  // An entry (ready or filling) that begins its prompt.
  int best = -1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const Entry& p = entries_[e];
    if (p.tokens.empty() || p.len() > limit || (best >= 0 && p.len() <= len(best))) continue;
    if (p.hash == token_hash(prompt.first(p.tokens.size())) &&
        std::equal(p.tokens.begin(), p.tokens.end(), prompt.begin()))
      best = static_cast<int>(e);
  }
  if (best >= 0) ++at(best).waiters;  // kept while a longer one is sought
  const int64_t have = best >= 0 ? len(best) : 0;
  // The longest common start with another request's prompt.
  int other = -1;
  int64_t common = 0;
  for (size_t i = 0; i < others.size(); ++i) {
    const int64_t n = std::min(limit, static_cast<int64_t>(others[i].prompt.size()));
    const auto diff = std::mismatch(prompt.begin(), prompt.begin() + n, others[i].prompt.begin());
    const int64_t shared = (diff.first - prompt.begin()) / kBlock * kBlock;
    if (shared > common) {
      common = shared;
      other = static_cast<int>(i);
    }
  }
  if (common >= kMin && common > have) {
    // The other request gives the entry now if its state is that of exactly
    // the common part, or if the state is attention rows only (no recurrent
    // state, no sliding ring) and it has them; it fills the entry if its
    // prefill has not passed the common part yet (nor will jump past it by a
    // copy); else the joiner's own prefill fills it.
    const User& o = others[static_cast<size_t>(other)];
    const SequenceState& kv = model_.sequence_state();
    const bool rows_only = kv.n_recurrent_layers() == 0 && kv.n_sliding_layers() == 0;
    const int64_t other_at = o.use >= 0 ? std::max(o.fed, len(o.use)) : o.fed;
    int maker = -1;
    bool now = false;
    if ((rows_only && o.fed >= common) || (!o.decoding && o.use < 0 && o.fed == common)) {
      maker = other;
      now = true;
    } else if (!o.decoding && o.make < 0 && other_at <= common) {
      maker = other;
    }
    const int e = take(common, best);
    if (e >= 0) {
      Entry& p = at(e);
      p.tokens.assign(prompt.begin(), prompt.begin() + common);
      p.hash = token_hash(p.tokens);
      p.used = ++tick_;
      if (now) {
        model_.copy_sequence(o.seq, p.seq, common);  // ready at once
      } else {
        p.filling = true;
        plan.make = e;
        plan.maker = maker;
      }
      if (maker >= 0) {  // the joiner waits for it rather than for the shorter one
        if (best >= 0) --at(best).waiters;
        best = e;
        ++p.waiters;
      }
    }
  }
  if (best < 0) return plan;
  plan.use = best;
  at(best).used = ++tick_;
  return plan;
}

// A free entry holding `len` rows of the pool, evicting idle ones (never
// `keep`) as needed; -1 when none can be had.
int PrefixCache::take(int64_t len, int keep) {
  auto free = [&] {
    return std::find_if(entries_.begin(), entries_.end(), [](const Entry& p) { return p.tokens.empty(); });
  };
  auto it = free();
  if (it == entries_.end() && evict(keep)) it = free();
  if (it == entries_.end()) return -1;
  while (!model_.reserve_rows(it->seq, len))
    if (!evict(keep)) return -1;
  return static_cast<int>(it - entries_.begin());
}

bool PrefixCache::evict(int keep) {
  int lru = -1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const Entry& p = entries_[e];
    if (static_cast<int>(e) != keep && p.ready() && p.waiters == 0 && (lru < 0 || p.used < at(lru).used))
      lru = static_cast<int>(e);
  }
  if (lru < 0) return false;
  drop(lru);
  return true;
}

void PrefixCache::drop(int e) {
  Entry& p = at(e);
  model_.release_rows(p.seq);
  p.tokens.clear();
  p.filling = false;
  p.waiters = 0;
}

void PrefixCache::snapshot(int e, int32_t seq) {
  Entry& p = at(e);
  model_.copy_sequence(seq, p.seq, p.len());
  p.filling = false;
}

int64_t PrefixCache::copy(int e, int32_t seq) {
  Entry& p = at(e);
  model_.copy_sequence(p.seq, seq, p.len());
  --p.waiters;
  p.used = ++tick_;
  return p.len();
}

}  // namespace ns
