#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <string>

#include "engine/stream/buffer_pool.h"
#include "common/error.h"

using namespace ns::stream;

namespace {

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("slots are 4096-aligned, rounded up, disjoint and writable") {
  BufferPool pool(5, 10000);
  CHECK(pool.n_slots() == 5);
  CHECK(pool.slot_bytes() == 12288);
  CHECK(pool.bytes() == 5 * 12288);
  for (uint32_t i = 0; i < 5; ++i) {
    CHECK(reinterpret_cast<uintptr_t>(pool.slot(i)) % 4096 == 0);
    if (i > 0) CHECK(pool.slot(i) == pool.slot(i - 1) + pool.slot_bytes());
    pool.slot(i)[0] = static_cast<uint8_t>(i);
    pool.slot(i)[pool.slot_bytes() - 1] = static_cast<uint8_t>(i);
  }
  for (uint32_t i = 0; i < 5; ++i) CHECK(pool.slot(i)[0] == i);
}

TEST_CASE("acquire hands out each slot once; release takes it back; misuse throws") {
  BufferPool pool(3, 4096, {false, false});
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) got.insert(pool.acquire());
  CHECK(got == std::set<int32_t>{0, 1, 2});
  CHECK(pool.acquire() == -1);
  CHECK(pool.n_free() == 0);
  pool.release(1);
  CHECK(pool.n_free() == 1);
  CHECK(pool.acquire() == 1);
  pool.release(2);
  CHECK_THROWS_AS(pool.release(2), ns::Error);  // twice
  CHECK_THROWS_AS(pool.release(7), ns::Error);  // no such slot
  CHECK_THROWS_AS(BufferPool(0, 4096), ns::Error);
}

TEST_CASE("iovecs group slots into runs of at most 1 GiB, and buffer_index names the run") {
  // 300 MiB slots, not pre-faulted: only address space.
  BufferPool pool(8, 300ull << 20, {false, false});
  const auto iov = pool.iovecs();
  REQUIRE(iov.size() == 3);  // 3 + 3 + 2 slots
  uint64_t total = 0;
  for (const iovec& v : iov) {
    CHECK(v.iov_len <= (1ull << 30));
    total += v.iov_len;
  }
  CHECK(total == pool.bytes());
  for (uint32_t i = 0; i < 8; ++i) {
    const iovec& v = iov[static_cast<size_t>(pool.buffer_index(i))];
    const auto* lo = static_cast<const uint8_t*>(v.iov_base);
    CHECK(pool.slot(i) >= lo);
    CHECK(pool.slot(i) + pool.slot_bytes() <= lo + v.iov_len);
  }
}

TEST_CASE("pre-faulting puts the whole arena in RSS at construction; huge pages align it to 2 MiB") {
  const uint64_t before = rss_bytes();
  BufferPool pool(16, 4ull << 20, {true, true});
  const uint64_t after = rss_bytes();
  CHECK(after - before >= pool.bytes() * 9 / 10);
  CHECK(reinterpret_cast<uintptr_t>(pool.slot(0)) % (2u << 20) == 0);
}
