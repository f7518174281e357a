// The bookkeeping half of the expert cache, without I/O: which key each slot
// holds, which slots are pinned, and which unpinned slot a replacement policy
// gives up when a new key needs room.
//
// Policies:
// - lru: evict the least recently used.
// - lfu: evict the least frequently used, ties to the least recent. Counts are
//   kept per key (they survive eviction, so a popular expert that was pushed
//   out comes back with its history) and halved every aging_period accesses,
//   so popularity that fades stops protecting an entry. Unlike LRU it is not
//   flushed by a burst of one-off experts (a batch of unusual tokens).
//
// Victims are found by scanning the slots: capacity is hundreds to a few
// thousand, a scan takes about a microsecond, and every eviction is followed
// by a multi-megabyte read, so a heap would buy nothing.
//
// Contract: keys are 0..n_keys-1; a pinned slot is never evicted; no
// allocation after construction. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ns::stream {

enum class CachePolicy { lru, lfu };
const char* cache_policy_name(CachePolicy p);
CachePolicy parse_cache_policy(std::string_view s);  // "lru" | "lfu"; throws Error(invalid_input)

class CacheIndex {
 public:
  static constexpr int32_t kNone = -1;

  // aging_period 0: 4 × max(n_keys, capacity) accesses.
  CacheIndex(uint32_t n_keys, uint32_t capacity, CachePolicy policy, uint64_t aging_period = 0);

  uint32_t capacity() const { return static_cast<uint32_t>(slot_key_.size()); }
  uint32_t n_keys() const { return static_cast<uint32_t>(key_slot_.size()); }
  uint32_t n_resident() const { return capacity() - static_cast<uint32_t>(free_.size()); }
  CachePolicy policy() const { return policy_; }

  int32_t find(uint32_t key) const { return key_slot_[key]; }
  int32_t key_of(int32_t slot) const { return slot_key_[static_cast<size_t>(slot)]; }

  // A use of the key in `slot`: recency, and a count for lfu.
  void touch(int32_t slot);
  // Makes `key` (not resident) resident in a free slot or in the policy's
  // victim; returns the slot and sets *evicted to the key pushed out (kNone if
  // the slot was free). Returns kNone when every slot is pinned. `access`
  // counts the insertion as a use (demand reads do, prefetches do not).
  int32_t insert(uint32_t key, bool access, int32_t* evicted);
  // Drops the key in `slot` (unpinned) and frees the slot.
  void erase(int32_t slot);

  void pin(int32_t slot) { ++pins_[static_cast<size_t>(slot)]; }
  void unpin(int32_t slot);
  uint32_t pins(int32_t slot) const { return pins_[static_cast<size_t>(slot)]; }

  // One demand access for simulations and tests: touch on a hit, insert on a
  // miss. Returns true on a hit; *evicted as for insert().
  bool access(uint32_t key, int32_t* evicted);

  uint32_t frequency(uint32_t key) const { return freq_[key]; }

 private:
  int32_t victim() const;
  void count_use(uint32_t key);

  CachePolicy policy_;
  uint64_t aging_period_;
  uint64_t clock_ = 0;  // advances on every use
  uint64_t since_aging_ = 0;
  std::vector<int32_t> key_slot_;   // [n_keys] slot or kNone
  std::vector<uint32_t> freq_;      // [n_keys] aged use counts
  std::vector<int32_t> slot_key_;   // [capacity] key or kNone
  std::vector<uint64_t> last_use_;  // [capacity] clock of the last use
  std::vector<uint32_t> pins_;      // [capacity]
  std::vector<int32_t> free_;       // free slots (a stack; reserved for capacity)
};

}  // namespace ns::stream
