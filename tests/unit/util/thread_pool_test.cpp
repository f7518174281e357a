// ThreadPool: every index covered exactly once by disjoint ranges, for any n
// against any thread count (including n smaller than the pool), chunk 0 on
// the caller, reuse across many jobs, and exceptions from any chunk.
#include "engine/util/thread_pool.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using ns::ThreadPool;

TEST_CASE("every index is covered exactly once, by non-empty ranges") {
  for (const int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (const int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 100, 1001}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_calls{0};
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int index, int64_t begin, int64_t end) {
        calls++;
        if (index < 0 || index >= threads || begin >= end || begin < 0 || end > n) bad_calls++;
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      CHECK(bad_calls == 0);
      CHECK(calls <= std::min<int64_t>(threads, n));
      for (int64_t i = 0; i < n; ++i) CHECK(hits[static_cast<size_t>(i)] == 1);
    }
  }
}

TEST_CASE("n smaller than the pool: each index once, no thread gets two ranges") {
  ThreadPool pool(4);
  for (const int64_t n : {2, 3}) {
    std::mutex mu;
    std::vector<int> indices;
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, [&](int index, int64_t begin, int64_t end) {
      std::lock_guard lock(mu);
      indices.push_back(index);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (const int h : hits) CHECK(h == 1);
    std::sort(indices.begin(), indices.end());
    CHECK(std::adjacent_find(indices.begin(), indices.end()) == indices.end());
  }
}

TEST_CASE("chunk 0 runs on the calling thread, the others on workers") {
  ThreadPool pool(2);
  std::thread::id ids[2];
  pool.parallel_for(2, [&](int index, int64_t, int64_t) { ids[index] = std::this_thread::get_id(); });
  CHECK(ids[0] == std::this_thread::get_id());
  CHECK(ids[1] != std::this_thread::get_id());
  CHECK(ids[1] != std::thread::id());
}

TEST_CASE("a pool runs many jobs in a row") {
  ThreadPool pool(3);
  int64_t total = 0;
  for (int job = 0; job < 2000; ++job) {
    std::atomic<int64_t> sum{0};
    const int64_t n = job % 17;
    pool.parallel_for(n, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    CHECK(sum == n * (n - 1) / 2);
    total += sum;
  }
  CHECK(total > 0);
}

TEST_CASE("an exception in any chunk reaches the caller after all chunks finish") {
  ThreadPool pool(2);
  for (const int thrower : {0, 1}) {
    CAPTURE(thrower);
    std::atomic<int> finished{0};
    CHECK_THROWS_WITH_AS(pool.parallel_for(2,
                                           [&](int index, int64_t, int64_t) {
                                             if (index == thrower) throw std::runtime_error("chunk failed");
                                             std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                             finished++;
                                           }),
                         "chunk failed", std::runtime_error);
    CHECK(finished == 1);  // the other chunk completed before parallel_for returned
  }
  // Still usable afterwards.
  std::atomic<int> count{0};
  pool.parallel_for(10, [&](int, int64_t b, int64_t e) { count += static_cast<int>(e - b); });
  CHECK(count == 10);
}

TEST_CASE("a size of zero or less means one thread per hardware thread") {
  ThreadPool pool(0);
  CHECK(pool.size() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}
