// Replacement policies on known access traces (CacheIndex has no I/O).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/stream/cache_index.h"
#include "common/error.h"

using namespace ns::stream;

namespace {

struct TraceResult {
  int hits = 0;
  std::vector<int32_t> evicted;  // keys, in order
};

TraceResult run(CacheIndex& c, const std::vector<uint32_t>& trace) {
  TraceResult r;
  for (uint32_t k : trace) {
    int32_t ev = CacheIndex::kNone;
    r.hits += c.access(k, &ev);
    if (ev != CacheIndex::kNone) r.evicted.push_back(ev);
  }
  return r;
}

}  // namespace

TEST_CASE("lru evicts the least recently used") {
  CacheIndex c(10, 3, CachePolicy::lru);
  const TraceResult r = run(c, {0, 1, 2, 0, 3, 4, 0, 1});
  // 0 1 2 fill; 0 hits; 3 evicts 1; 4 evicts 2; 0 hits; 1 evicts 3.
  CHECK(r.hits == 2);
  CHECK(r.evicted == std::vector<int32_t>{1, 2, 3});
  CHECK(c.n_resident() == 3);
  CHECK(c.find(0) != CacheIndex::kNone);
  CHECK(c.find(4) != CacheIndex::kNone);
  CHECK(c.find(1) != CacheIndex::kNone);
}

TEST_CASE("a burst of one-off keys flushes a hot key from lru but not from lfu") {
  // Key 9 is hot; 1, 2, 3 are seen once each (an unusual batch), then 9 again.
  const std::vector<uint32_t> trace = {9, 9, 9, 1, 2, 3, 9};
  CacheIndex lru(10, 2, CachePolicy::lru), lfu(10, 2, CachePolicy::lfu);
  const TraceResult a = run(lru, trace), b = run(lfu, trace);
  CHECK(a.hits == 2);
  CHECK(a.evicted == std::vector<int32_t>{9, 1, 2});
  CHECK(b.hits == 3);
  CHECK(b.evicted == std::vector<int32_t>{1, 2});
}

TEST_CASE("lfu ties go to the most recently used, and counts outlive eviction") {
  CacheIndex c(10, 2, CachePolicy::lfu, 1000);
  TraceResult r = run(c, {1, 2, 3});  // 1 and 2 tie at one use: 2 is newer and goes
  CHECK(r.evicted == std::vector<int32_t>{2});
  r = run(c, {1, 1, 4});  // 1 hits twice (count 3): 4 evicts 3 (count 1), never 1
  CHECK(c.frequency(1) == 3);
  CHECK(c.find(1) != CacheIndex::kNone);
  CHECK(r.hits == 2);
  CHECK(r.evicted == std::vector<int32_t>{3});
  r = run(c, {2});  // 2 comes back (its count survived eviction: now 2) and evicts 4, the least used
  CHECK(c.frequency(2) == 2);
  CHECK(r.evicted == std::vector<int32_t>{4});
}

TEST_CASE("a sweep over more keys than fit: lru hits nothing, lfu keeps what it holds") {
  // A batch of many sequences touches nearly every expert of every layer each
  // step, in the same order: the pattern that defeats recency.
  std::vector<uint32_t> trace;
  for (int round = 0; round < 10; ++round)
    for (uint32_t k = 0; k < 8; ++k) trace.push_back(k);
  CacheIndex lru(8, 4, CachePolicy::lru), lfu(8, 4, CachePolicy::lfu, 1000);
  const TraceResult a = run(lru, trace), b = run(lfu, trace);
  CHECK(a.hits == 0);
  CHECK(b.hits >= 9 * 3);  // after the first round, at least 3 of the 4 held keys hit every round
}

TEST_CASE("lfu aging halves every count each period, so faded popularity stops protecting a key") {
  CacheIndex c(4, 2, CachePolicy::lfu, 4);
  run(c, {0, 0, 0});
  CHECK(c.frequency(0) == 3);
  run(c, {1});  // the 4th access: counts halve
  CHECK(c.frequency(0) == 1);
  CHECK(c.frequency(1) == 0);
  run(c, {1, 1, 1, 1});  // 8th access halves again: 0 -> 0, 1 -> 2
  CHECK(c.frequency(0) == 0);
  CHECK(c.frequency(1) == 2);
  int32_t ev = CacheIndex::kNone;
  c.access(2, &ev);
  CHECK(ev == 0);  // 0 was once the favourite
}

TEST_CASE("pinned slots are never victims; with every slot pinned there is no room") {
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::lfu}) {
    const std::string policy_name = cache_policy_name(p);
    CAPTURE(policy_name);
    CacheIndex c(10, 2, p);
    int32_t ev = CacheIndex::kNone;
    const int32_t s0 = c.insert(0, true, &ev);
    const int32_t s1 = c.insert(1, true, &ev);
    c.pin(s0);
    CHECK(c.insert(2, true, &ev) == s1);  // 0 is older but pinned
    CHECK(ev == 1);
    c.pin(s1);
    CHECK(c.insert(3, true, &ev) == CacheIndex::kNone);
    CHECK(c.find(3) == CacheIndex::kNone);
    c.unpin(s0);
    CHECK(c.insert(3, true, &ev) == s0);
    CHECK(ev == 0);
    CHECK_THROWS_AS(c.unpin(s0), ns::Error);
  }
}

TEST_CASE("erase frees a slot; misuse throws") {
  CacheIndex c(5, 2, CachePolicy::lru);
  int32_t ev = CacheIndex::kNone;
  const int32_t s = c.insert(3, true, &ev);
  CHECK_THROWS_AS(c.insert(3, true, &ev), ns::Error);
  c.pin(s);
  CHECK_THROWS_AS(c.erase(s), ns::Error);
  c.unpin(s);
  c.erase(s);
  CHECK(c.find(3) == CacheIndex::kNone);
  CHECK(c.n_resident() == 0);
  CHECK_THROWS_AS(CacheIndex(5, 0, CachePolicy::lru), ns::Error);
}

TEST_CASE("policy names parse") {
  CHECK(parse_cache_policy("lru") == CachePolicy::lru);
  CHECK(parse_cache_policy("lfu") == CachePolicy::lfu);
  CHECK_THROWS_AS(parse_cache_policy("arc"), ns::Error);
}
