// Prompt-prefix snapshots for the batch step loop (generation_batch.h; the
// design and its reasons: docs/architecture.md, "Prefix sharing").
//
// Each entry is one of the model's spare sequences (Model::prefix_slots(),
// EngineOptions::prefix_cache) holding the state after exactly P prompt tokens
// (attention rows 0..P-1, a sliding layer's ring as it stands after P, the
// recurrent state after P), keyed by a hash of those tokens and compared
// token by token (a collision shares nothing). P is a multiple of kBlock, at
// least kMin and at most the prompt's length - 1 (its last token is always
// computed: it gives the first logits). An entry is free, filling (a
// producer's prefill will stop at P and snapshot() it) or ready; it holds P
// rows of the KV pool from the moment it is taken until it is dropped.
//
// Contract: plan() is called once per joining request (choice 0) and counts
// it as a waiter of the entry it returns in Plan::use; every waiter later
// either copy()s that entry once it is ready or leave()s it. evict() drops
// only ready entries nobody waits for (least recently used first), so an
// index held by a waiter or a producer stays valid until drop(). The caller
// drops an entry whose producer leaves before P and moves its waiters back to
// their own prefill. Not thread-safe; one cache per batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model.h"

namespace ns {

class PrefixCache {
 public:
  static constexpr int64_t kBlock = 16;  // snapshot lengths are multiples of this
  static constexpr int64_t kMin = 32;    // shorter common parts are not shared

  // A request of the batch (choice 0) as the plan sees it.
  struct User {
    std::span<const int32_t> prompt;
    int64_t fed = 0;        // tokens already in its state
    bool decoding = false;  // its prompt is done
    int use = -1;           // the entry it waits to copy, or -1
    int make = -1;          // the entry its prefill fills, or -1
    int32_t seq = 0;        // its sequence in the model
  };
  // Where a joiner's prompt finds its longest shared part.
  struct Plan {
    int use = -1;    // the entry it copies before its own prefill goes on (it waits for it), or -1
    int make = -1;   // an entry a prefill must stop at and snapshot(), or -1
    int maker = -1;  // whose prefill: -1 the joiner's, else an index into `others`
  };

  explicit PrefixCache(Model& model);
  ~PrefixCache();  // the entries' rows go back to the pool
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool available() const { return !entries_.empty(); }  // the model has spare sequences
  int entries() const;                                  // entries kept now (filling or ready)
  int64_t len(int e) const { return at(e).len(); }
  bool ready(int e) const { return at(e).ready(); }

  // The joiner's longest shared part among the ready or filling entries and
  // the prompts of `others` (the batch's other requests, in slot order); an
  // entry taken for a common part with a request that is exactly there (or
  // whose state is attention rows only and holds them) is ready at once.
  Plan plan(std::span<const int32_t> prompt, std::span<const User> others);
  // The producer in sequence `seq` has fed exactly len(e) tokens: its state becomes the entry.
  void snapshot(int e, int32_t seq);
  // A waiter copies the ready entry into its sequence; returns the tokens copied.
  int64_t copy(int e, int32_t seq);
  // A waiter leaves without copying.
  void leave(int e) { --at(e).waiters; }
  // Frees the entry (its rows, its waiters); the caller resets who referred to it.
  void drop(int e);
  // Drops the least recently used ready entry nobody waits for, never `keep`; false when there is none.
  bool evict(int keep = -1);

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // the prompt prefix it holds; empty: free
    uint64_t hash = 0;            // token_hash(tokens)
    int32_t seq = 0;              // its spare sequence in the model's state
    bool filling = false;         // a producer's prefill has not reached its end yet
    int waiters = 0;              // requests that will copy it (they keep it from eviction)
    uint64_t used = 0;            // last use, for LRU eviction
    bool ready() const { return !tokens.empty() && !filling; }
    int64_t len() const { return static_cast<int64_t>(tokens.size()); }
  };
  Entry& at(int e) { return entries_[static_cast<size_t>(e)]; }
  const Entry& at(int e) const { return entries_[static_cast<size_t>(e)]; }
  int take(int64_t len, int keep);  // a free entry with len rows reserved, evicting (never keep), or -1

  Model& model_;
  std::vector<Entry> entries_;
  uint64_t tick_ = 0;
};

}  // namespace ns
