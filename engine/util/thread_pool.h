// A fixed pool of worker threads for data-parallel loops in the forward pass.
// parallel_for blocks until every chunk is done; the calling thread takes part.
// Not reentrant: one parallel_for at a time per pool. If fn throws, the first
// exception is rethrown by parallel_for once every thread has finished its chunk.
//
// Waiting: a job is published by an atomic generation counter, outside any
// mutex (published under one, a spinning worker blocked on the mutex the
// caller held: 1,437 futex calls a decoded token instead of 632). Each wait,
// the workers' for the next job and the caller's for the workers, first
// spins (pause) for up to spin_us microseconds on that counter (or on the
// count of workers still inside the job), then blocks on a condition variable
// (a futex). A wake of a blocked thread is a futex call and, on a VM, an IPI:
// tens of microseconds, against ~100 us for one of decode's products; a
// decoded token of a 27-layer MoE model makes several hundred parallel calls.
//
// The spin is adaptive, per thread, because a spinning thread takes a CPU
// that another runnable thread of this machine may be waiting for (a pool that
// always spun decoded one sequence at 0.72-0.93x under a load of 8-9;
// docs/performance.md "Threads: the adaptive spin" has this pool's figures).
// A thread stops spinning for a while (2 ms, doubling up to 256 ms while it
// keeps happening, halved after 64 good spins in a row) when
//   - it was preempted: a spin saw two clock reads a few pauses apart 0.5 ms
//     or more apart and the thread's involuntary context switches
//     (getrusage(RUSAGE_THREAD)) rose since it last looked: another thread of
//     this OS took its CPU for a scheduler slice, as a busy one does. Shorter
//     gaps are not counted: without a switch they are the hypervisor's (a VM's
//     vCPU stolen by its host, a host interrupt), with one a kernel thread's
//     few microseconds (kworker, kswapd, DAMON: 15-22 a second per thread on
//     the quiet 2-vCPU VM). Spinning takes those from no one; calming on
//     every gap of 20 us left the worker blocking 220 of 297 waits a decoded
//     token on that quiet machine (12.8 tok/s, against 13.4-16.8 spinning
//     through them), and on every switch still 110-160 (docs/performance.md);
//   - 4 spins in a row ran out without the event (the peer is descheduled or
//     the gaps between jobs are longer than the spin).
// Blocked, it waits exactly as a pool without spinning does, so a loaded
// machine pays at most one spin per back-off period. spin_us 0: never spin.
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
  // thread_spin_us). One decoded sequence on the quiet 2-vCPU VM, interleaved
  // runs: 0 us 7.7-10.6 tok/s, 200 us 12.4-15.5, 1000 us 11.5-13.1; with two
  // busy processes beside it 200 us = 0 us (6.34/6.65, 5.26/5.25); 64
  // sequences the same at 0 and 200 (docs/performance.md "Threads: the spin
  // that holds").
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
  void run_chunks(int index);  // the dynamic job's loop
  void publish(uint64_t word);  // makes gen_word_ = word visible and wakes blocked workers
  template <class Done>
  void wait_done(const Done& done);  // the caller's wait for the workers
  void worker_finished();              // after a worker made the caller's wait end
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
