// ThreadPool: every index covered exactly once by disjoint ranges, for any n
// against any thread count (including n smaller than the pool), chunk 0 on
// the caller, reuse across many jobs, and exceptions from any chunk; the same
// with the spin off, on and so long that every wait spins (many tiny jobs in a
// row, exceptions, destruction while the workers spin, a pool of one); and the
// adaptive spin's rule (AdaptiveSpin) on a clock the test drives.
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
    CHECK_THROWS_WITH_AS(pool.parallel_for(
                             2,
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

// Spins: off, a short one, and long enough that a worker waits for the next
// job spinning rather than blocked (unless the OS deschedules it).
constexpr int kSpins[] = {0, 100, 1'000'000};

TEST_CASE("many tiny jobs in a row, both kinds mixed, at every spin") {
  for (const int spin : kSpins) {
    CAPTURE(spin);
    ThreadPool pool(3, spin);
    CHECK(pool.spin_us() == spin);
    uint64_t parallel = 0;
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = 2 + job % 7;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      if (job % 2 == 0) {
        pool.parallel_for(n, [&](int, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      } else {
        pool.parallel_chunks(n, [&](int, int64_t c) { hits[static_cast<size_t>(c)]++; });
      }
      ++parallel;
      bool once = true;
      for (const auto& h : hits) once &= h == 1;
      REQUIRE(once);
    }
    pool.parallel_for(1, [](int, int64_t, int64_t) {});  // one index: on the caller
    pool.parallel_chunks(1, [](int, int64_t) {});        // one chunk: on the caller
    const ThreadPool::Stats st = pool.stats();
    CHECK(st.jobs == parallel);
    CHECK(st.inline_jobs == 2);
    CHECK(st.wakes <= st.jobs);
    CHECK(st.caller_blocks <= st.jobs);
  }
}

TEST_CASE("a pool of one runs everything on the caller, whatever the spin") {
  ThreadPool pool(1, 1'000'000);
  const auto me = std::this_thread::get_id();
  int64_t sum = 0;
  bool on_caller = true;
  pool.parallel_for(10, [&](int index, int64_t b, int64_t e) {
    on_caller &= index == 0 && std::this_thread::get_id() == me;
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  pool.parallel_chunks(10, [&](int index, int64_t c) {
    on_caller &= index == 0 && std::this_thread::get_id() == me;
    sum += c;
  });
  CHECK(on_caller);
  CHECK(sum == 90);
  CHECK(pool.stats().jobs == 0);
  CHECK(pool.stats().inline_jobs == 2);
}

TEST_CASE("a chunk job not worth waking the workers for runs on the caller alone") {
  ThreadPool pool(2, 100);
  const auto me = std::this_thread::get_id();
  bool on_caller = true;
  int64_t sum = 0;
  pool.parallel_chunks(
      50,
      [&](int index, int64_t c) {
    on_caller &= index == 0 && std::this_thread::get_id() == me;
    sum += c;
      },
      /*worth_waking=*/false);
  CHECK(on_caller);
  CHECK(sum == 50 * 49 / 2);
  CHECK(pool.stats().jobs == 0);
  CHECK(pool.stats().inline_jobs == 1);
}

TEST_CASE("exceptions while the workers spin: the first reaches the caller, the pool stays usable") {
  for (const int spin : kSpins) {
    CAPTURE(spin);
    ThreadPool pool(3, spin);
    for (int round = 0; round < 200; ++round) {
      const int thrower = round % 3;
      std::atomic<int> done{0};
      // parallel_for: the throwing range's thread; the others finish theirs first.
      CHECK_THROWS_WITH_AS(pool.parallel_for(
                               3,
                               [&](int index, int64_t, int64_t) {
        if (index == thrower) throw std::runtime_error("range failed");
        done++;
                               }),
                           "range failed", std::runtime_error);
      CHECK(done == 2);
      // parallel_chunks: chunk 5 throws wherever it runs; no chunk runs twice.
      std::vector<std::atomic<int>> hits(64);
      CHECK_THROWS_WITH_AS(pool.parallel_chunks(
                               64,
                               [&](int, int64_t c) {
        hits[static_cast<size_t>(c)]++;
        if (c == 5) throw std::runtime_error("chunk failed");
                               }),
                           "chunk failed", std::runtime_error);
      for (const auto& h : hits) CHECK(h <= 1);
      CHECK(hits[5] == 1);
    }
    std::atomic<int64_t> count{0};
    pool.parallel_chunks(100, [&](int, int64_t) { count++; });
    CHECK(count == 100);
  }
}

TEST_CASE("destroying a pool whose workers spin (or have just been handed a job) returns") {
  for (const int spin : kSpins) {
    CAPTURE(spin);
    for (int round = 0; round < 100; ++round) {
      std::atomic<int> calls{0};
      {
        ThreadPool pool(4, spin);
        if (round % 2 == 0) pool.parallel_chunks(8, [&](int, int64_t) { calls++; });
      }  // the destructor joins the workers: it returning is the check
      CHECK(calls == (round % 2 == 0 ? 8 : 0));
    }
  }
}

TEST_CASE("the adaptive spin: calm after a preempted spin or 4 timeouts, doubling, halved by successes") {
  using S = ns::AdaptiveSpin;
  S s;
  CHECK(s.may_spin(0));
  // Timeouts: the 4th in a row calms the thread for the minimum period.
  for (int i = 0; i < S::kTimeoutsBeforeCalm - 1; ++i) s.ran_out(1000);
  CHECK(s.may_spin(1000));
  s.ran_out(1000);
  CHECK_FALSE(s.may_spin(1000));
  CHECK(s.calm_until_ns() == 1000 + S::kCalmMinNs);
  CHECK(s.may_spin(1000 + S::kCalmMinNs));
  // A success in between resets the count of timeouts.
  int64_t t = 10 * S::kCalmMinNs;
  for (int i = 0; i < S::kTimeoutsBeforeCalm - 1; ++i) s.ran_out(t);
  s.found();
  s.ran_out(t);
  CHECK(s.may_spin(t));
  // A gap without a new involuntary switch (the hypervisor's) does not calm,
  // nor a short one with a switch (a kernel thread's blip); the first gap
  // only records the count.
  const int64_t slice = S::kPreemptedGapNs;
  CHECK_FALSE(s.gap(t, slice, 7));
  CHECK_FALSE(s.gap(t, slice, 7));
  CHECK_FALSE(s.gap(t, slice - 1, 8));
  CHECK(s.may_spin(t));
  // Preempted spins (the count rose) calm at once, each period twice the last, up to the cap.
  uint64_t switches = 8;
  int64_t period = S::kCalmMinNs;
  for (int i = 0; i < 12; ++i) {
    period = std::min(period * 2, S::kCalmMaxNs);
    CHECK(s.gap(t, slice, ++switches));
    CHECK(s.calm_until_ns() == t + period);
    t = s.calm_until_ns();
  }
  CHECK(period == S::kCalmMaxNs);
  // Successes in a row halve the period; the next calm is twice that.
  for (int i = 0; i < S::kSuccessesToHalve; ++i) s.found();
  CHECK(s.gap(t, slice, ++switches));
  CHECK(s.calm_until_ns() == t + S::kCalmMaxNs);  // (max / 2) * 2
  for (int i = 0; i < 3 * S::kSuccessesToHalve; ++i) s.found();
  CHECK(s.gap(t, slice, ++switches));
  CHECK(s.calm_until_ns() == t + S::kCalmMaxNs / 4);  // max / 8, doubled
}
