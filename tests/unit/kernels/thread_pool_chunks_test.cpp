// ThreadPool::parallel_chunks, which matmul hands its row chunks out with:
// every chunk runs exactly once, back-to-back calls (mixed with parallel_for)
// never lose or repeat work even when a worker wakes late, and an exception
// reaches the caller after every thread is out of the job.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "engine/util/thread_pool.h"

using ns::ThreadPool;

TEST_CASE("parallel_chunks runs every chunk exactly once, call after call") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(97);
    for (int round = 0; round < 300; ++round) {
      const int64_t n = 1 + round % 97;
      for (auto& h : hits) h.store(0);
      pool.parallel_chunks(n, [&](int t, int64_t c) {
        CHECK(t >= 0);
        CHECK(t < threads);
        hits[static_cast<size_t>(c)].fetch_add(1);
      });
      int total = 0;
      for (int64_t c = 0; c < n; ++c) total += hits[static_cast<size_t>(c)].load() == 1;
      REQUIRE(total == n);
      // A static job in between: late workers of the chunk job must not disturb it.
      std::atomic<int64_t> sum{0};
      pool.parallel_for(n, [&](int, int64_t b, int64_t e) { sum += e - b; });
      REQUIRE(sum.load() == n);
    }
  }
}

TEST_CASE("parallel_chunks rethrows a chunk's exception after the job") {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  CHECK_THROWS_AS(pool.parallel_chunks(
                      64,
                      [&](int, int64_t c) {
    ++ran;
    if (c == 5) throw std::runtime_error("chunk 5");
                      }),
                  std::runtime_error);
  CHECK(ran.load() >= 1);
  // The pool is usable afterwards.
  std::atomic<int> again{0};
  pool.parallel_chunks(10, [&](int, int64_t) { ++again; });
  CHECK(again.load() == 10);
}
