// A fixed pool of worker threads for data-parallel loops in the forward pass.
// parallel_for blocks until every chunk is done; the calling thread takes part.
// Not reentrant: one parallel_for at a time per pool. If fn throws, the first
// exception is rethrown by parallel_for once every thread has finished its chunk.
//
// Waiting: a job is published by an atomic generation counter, outside any
// mutex (so a spinning worker never blocks on the caller's mutex). Each wait
// first spins (pause) for up to spin_us microseconds on that counter (or on
// the count of workers still inside the job), then blocks on a condition
// variable: a futex wake costs tens of microseconds on a VM, against ~100 us
// for one of decode's products.
//
// The spin is adaptive, per thread, because a spinning thread takes a CPU
// another runnable thread may be waiting for. A thread stops spinning for a
// while (2 ms, doubling up to 256 ms while it keeps happening, halved after
// 64 good spins in a row) when
//   - it was preempted: two clock reads a few pauses apart were 0.5 ms or more
//     apart and its involuntary context switches (getrusage(RUSAGE_THREAD))
//     rose since it last looked; shorter gaps (the hypervisor's, a kernel
//     thread's) are spun through;
//   - 4 spins in a row ran out without the event.
// Blocked, it waits exactly as a pool without spinning does, so a loaded
// machine pays at most one spin per back-off period. spin_us 0: never spin.
// The measurements behind each rule: docs/performance.md, "Threads: the
// adaptive spin" and "Threads: the spin that holds".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ns {

// One thread's spin rule (above), apart from the clock so tests can drive it.
class AdaptiveSpin {
 public:
  static constexpr int64_t kDescheduledGapNs = 20'000;  // two clock reads further apart: descheduled
  static constexpr int64_t kPreemptedGapNs = 500'000;   // a gap this long with a switch: preempted
  static constexpr int kTimeoutsBeforeCalm = 4;
  static constexpr int kSuccessesToHalve = 64;
  static constexpr int64_t kCalmMinNs = 2'000'000;
  static constexpr int64_t kCalmMaxNs = 256'000'000;

  bool may_spin(int64_t now_ns) const { return now_ns >= calm_until_ns_; }
  int64_t calm_until_ns() const { return calm_until_ns_; }
  void found();                  // the event came during the spin
  void ran_out(int64_t now_ns);  // the spin ended without it
  // The spin saw a gap of gap_ns >= kDescheduledGapNs between two clock reads;
  // involuntary_switches is the thread's count of them now. True (the thread
  // is calmed, its spin ends) when the gap is kPreemptedGapNs or more and the
  // count rose since the last call; the first call only records it.
  bool gap(int64_t now_ns, int64_t gap_ns, uint64_t involuntary_switches);

 private:
  void calm(int64_t now_ns);
  int64_t calm_until_ns_ = 0;  // no spinning before this steady-clock time
  int64_t backoff_ns_ = 0;     // the last calm period
  int timeouts_ = 0;           // spins in a row that ran out
  int successes_ = 0;          // spins in a row that found the event
  uint64_t switches_ = 0;      // involuntary context switches at the last gap
  bool seen_switches_ = false;
};

class ThreadPool {
 public:
  // The default spin before blocking, in microseconds (config key
  // thread_spin_us; chosen in docs/performance.md "Threads: the spin that holds").
  static constexpr int kDefaultSpinUs = 200;

  // n_threads: total threads including the caller; <=0 means hardware_concurrency.
  // spin_us: how long a wait spins before blocking (0: never; see above).
  explicit ThreadPool(int n_threads, int spin_us = kDefaultSpinUs);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  int spin_us() const { return static_cast<int>(spin_ns_ / 1000); }
  // Calls fn(thread_index, begin, end) over [0, n) split into size() contiguous ranges.
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);
  // Calls fn(thread_index, chunk) for every chunk in [0, n_chunks), handing
  // chunks out one at a time to whichever thread is free. On a machine shared
  // with other work a thread the OS has paused delays only its current chunk
  // (the others take the rest), and a worker that has not woken up by the time
  // the chunks run out is not waited for. Use where chunks are independent and
  // which thread runs one does not matter. worth_waking false: the caller
  // runs every chunk itself (a job too small to pay for waking the workers).
  void parallel_chunks(int64_t n_chunks, const std::function<void(int, int64_t)>& fn, bool worth_waking = true);

  // Counters since construction, for benches (read them from the calling
  // thread, between jobs).
  struct Stats {
    uint64_t jobs = 0;           // parallel_for / parallel_chunks calls handed to the workers
    uint64_t inline_jobs = 0;    // calls run on the caller alone (1 thread, 1 chunk, not worth waking)
    uint64_t wakes = 0;          // jobs that had to wake a blocked worker (a futex call)
    uint64_t caller_blocks = 0;  // jobs whose caller blocked waiting for the workers
    uint64_t worker_blocks = 0;  // times a worker blocked waiting for a job
  };
  Stats stats() const;

 private:
  // Spins until ready() or the spin's end (AdaptiveSpin's rule); ready()'s last value.
  template <class Ready>
  bool spin_until(const Ready& ready, AdaptiveSpin& s) const;

  void worker(int index);
  void run_chunks(int index);   // the dynamic job's loop
  void publish(uint64_t word);  // makes gen_word_ = word visible and wakes blocked workers
  template <class Done>
  void wait_done(const Done& done);             // the caller's wait for the workers
  void worker_finished();                       // after a worker made the caller's wait end
  void rethrow_first(std::exception_ptr mine);  // after the workers are done

  int n_threads_;
  int64_t spin_ns_;
  std::vector<std::thread> threads_;
  std::mutex mu_;  // only for blocking: guards nothing the fast path reads
  std::condition_variable cv_start_, cv_done_;

  // Read-shared by spinning workers: (job counter << 1) | 1 for a parallel_chunks job.
  alignas(64) std::atomic<uint64_t> gen_word_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers blocked (or about to) on cv_start_
  // The caller's side, written by it before publish().
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  const std::function<void(int, int64_t)>* chunk_job_ = nullptr;
  int64_t chunk_n_ = 0;
  uint64_t counter_ = 0;
  AdaptiveSpin caller_spin_;
  Stats stats_;
  std::exception_ptr error_;  // first exception a worker threw in the current job (written under mu_)

  // Written by the workers as they finish.
  alignas(64) std::atomic<int> pending_{0};  // parallel_for: workers not done yet
  // parallel_chunks: (job counter << 32) | kOpen while workers may join | workers inside.
  std::atomic<uint64_t> gate_{0};
  std::atomic<bool> caller_blocked_{false};
  std::atomic<uint64_t> worker_blocks_{0};
  alignas(64) std::atomic<int64_t> chunk_next_{0};
};

}  // namespace ns
