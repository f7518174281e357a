#include "engine/stream/cache_index.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ns::stream {

const char* cache_policy_name(CachePolicy p) { return p == CachePolicy::lru ? "lru" : "lfu"; }

CachePolicy parse_cache_policy(std::string_view s) {
  if (s == "lru") return CachePolicy::lru;
  if (s == "lfu") return CachePolicy::lfu;
  throw Error(ErrorKind::invalid_input, "cache_policy '" + std::string(s) + "' is not known: use lru or lfu");
}

CacheIndex::CacheIndex(uint32_t n_keys, uint32_t capacity, CachePolicy policy, uint64_t aging_period)
    : policy_(policy),
      aging_period_(aging_period ? aging_period : 4ull * std::max(n_keys, capacity)),
      key_slot_(n_keys, kNone),
      freq_(n_keys, 0),
      slot_key_(capacity, kNone),
      last_use_(capacity, 0),
      pins_(capacity, 0) {
  if (capacity == 0) throw Error(ErrorKind::internal, "CacheIndex needs at least one slot");
  free_.reserve(capacity);
  for (uint32_t s = capacity; s-- > 0;) free_.push_back(static_cast<int32_t>(s));
}

void CacheIndex::count_use(uint32_t key) {
  if (policy_ != CachePolicy::lfu) return;
  if (freq_[key] < UINT32_MAX) ++freq_[key];
  if (++since_aging_ >= aging_period_) {
    since_aging_ = 0;
    for (uint32_t& f : freq_) f >>= 1;
  }
}

void CacheIndex::touch(int32_t slot) {
  last_use_[static_cast<size_t>(slot)] = ++clock_;
  count_use(static_cast<uint32_t>(slot_key_[static_cast<size_t>(slot)]));
}

int32_t CacheIndex::victim() const {
  int32_t best = kNone;
  for (size_t s = 0; s < slot_key_.size(); ++s) {
    if (pins_[s] != 0 || slot_key_[s] == kNone) continue;
    if (best == kNone) {
      best = static_cast<int32_t>(s);
      continue;
    }
    const auto b = static_cast<size_t>(best);
    bool better = last_use_[s] < last_use_[b];
    if (policy_ == CachePolicy::lfu) {
      // Among equally frequent keys the most recent goes first: when a batch
      // sweeps more experts than fit, the established entries stay and the
      // newcomers pass through (LRU, or LFU broken by recency, would evict
      // each entry just before its next use and hit nothing).
      const uint32_t fs = freq_[static_cast<size_t>(slot_key_[s])], fb = freq_[static_cast<size_t>(slot_key_[b])];
      better = fs < fb || (fs == fb && last_use_[s] > last_use_[b]);
    }
    if (better) best = static_cast<int32_t>(s);
  }
  return best;
}

int32_t CacheIndex::insert(uint32_t key, bool access, int32_t* evicted) {
  if (key_slot_[key] != kNone) throw Error(ErrorKind::internal, "CacheIndex::insert of a resident key");
  *evicted = kNone;
  int32_t slot = kNone;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = victim();
    if (slot == kNone) return kNone;
    *evicted = slot_key_[static_cast<size_t>(slot)];
    key_slot_[static_cast<size_t>(*evicted)] = kNone;
  }
  slot_key_[static_cast<size_t>(slot)] = static_cast<int32_t>(key);
  key_slot_[key] = slot;
  last_use_[static_cast<size_t>(slot)] = ++clock_;
  if (access) count_use(key);
  return slot;
}

void CacheIndex::erase(int32_t slot) {
  const auto s = static_cast<size_t>(slot);
  if (slot_key_[s] == kNone || pins_[s] != 0)
    throw Error(ErrorKind::internal, "CacheIndex::erase of a free or pinned slot");
  key_slot_[static_cast<size_t>(slot_key_[s])] = kNone;
  slot_key_[s] = kNone;
  free_.push_back(slot);
}

void CacheIndex::unpin(int32_t slot) {
  if (pins_[static_cast<size_t>(slot)] == 0) throw Error(ErrorKind::internal, "CacheIndex::unpin of an unpinned slot");
  --pins_[static_cast<size_t>(slot)];
}

bool CacheIndex::access(uint32_t key, int32_t* evicted) {
  *evicted = kNone;
  const int32_t slot = key_slot_[key];
  if (slot != kNone) {
    touch(slot);
    return true;
  }
  insert(key, true, evicted);
  return false;
}

}  // namespace ns::stream
