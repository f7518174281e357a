#include "engine/util/thread_pool.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ns {
namespace {

constexpr int kPausesPerClockRead = 32;  // ~0.5-2 us of pause between clock reads
constexpr uint64_t kOpen = 1ull << 31;   // gate_: the chunk job still takes workers
constexpr uint64_t kInside = kOpen - 1;  // gate_: the count of workers inside

// This thread's involuntary context switches (0 where the OS cannot tell).
uint64_t involuntary_switches() {
#ifdef RUSAGE_THREAD
  rusage u{};
  if (getrusage(RUSAGE_THREAD, &u) == 0) return static_cast<uint64_t>(u.ru_nivcsw);
#endif
  return 0;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void run_range(const std::function<void(int, int64_t, int64_t)>& fn, int index, int n_threads, int64_t n) {
  const int64_t per = (n + n_threads - 1) / n_threads;
  const int64_t begin = std::min<int64_t>(n, per * index);
  const int64_t end = std::min<int64_t>(n, begin + per);
  if (begin < end) fn(index, begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, int spin_us) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  n_threads_ = n_threads;
  spin_ns_ = std::max(0, spin_us) * int64_t{1000};
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  { std::lock_guard lock(mu_); }  // a worker between its check of stop_ and its wait is now waiting
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

ThreadPool::Stats ThreadPool::stats() const {
  Stats s = stats_;
  s.worker_blocks = worker_blocks_.load(std::memory_order_relaxed);
  return s;
}

void AdaptiveSpin::calm(int64_t now_ns) {
  backoff_ns_ = std::clamp(backoff_ns_ * 2, kCalmMinNs, kCalmMaxNs);
  calm_until_ns_ = now_ns + backoff_ns_;
  timeouts_ = 0;
  successes_ = 0;
}

void AdaptiveSpin::found() {
  timeouts_ = 0;
  if (++successes_ >= kSuccessesToHalve) {
    backoff_ns_ /= 2;
    successes_ = 0;
  }
}

void AdaptiveSpin::ran_out(int64_t now_ns) {
  if (++timeouts_ >= kTimeoutsBeforeCalm) calm(now_ns);
}

bool AdaptiveSpin::gap(int64_t now_ns, int64_t gap_ns, uint64_t involuntary_switches) {
  const bool preempted = seen_switches_ && involuntary_switches != switches_ && gap_ns >= kPreemptedGapNs;
  switches_ = involuntary_switches;
  seen_switches_ = true;
  if (preempted) calm(now_ns);
  return preempted;
}

template <class Ready>
bool ThreadPool::spin_until(const Ready& ready, AdaptiveSpin& s) const {
  if (spin_ns_ == 0) return ready();
  int64_t now = now_ns();
  if (!s.may_spin(now)) return ready();
  const int64_t deadline = now + spin_ns_;
  for (;;) {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (ready()) {
        s.found();
        return true;
      }
      cpu_pause();
    }
    const int64_t t = now_ns();
    if (t - now >= AdaptiveSpin::kDescheduledGapNs && s.gap(t, t - now, involuntary_switches())) return ready();
    now = t;
    if (now >= deadline) {
      s.ran_out(now);
      return ready();
    }
  }
}

void ThreadPool::publish(uint64_t word) {
  ++stats_.jobs;
  gen_word_.store(word);  // seq_cst: ordered before the load of sleepers_ (a worker does the reverse)
  if (sleepers_.load() == 0) return;
  ++stats_.wakes;
  { std::lock_guard lock(mu_); }  // a worker between its check and its wait is now waiting
  cv_start_.notify_all();
}

template <class Done>
void ThreadPool::wait_done(const Done& done) {
  if (spin_until(done, caller_spin_)) return;
  std::unique_lock lock(mu_);
  caller_blocked_.store(true);  // seq_cst: before done()'s loads (a worker does the reverse)
  if (!done()) ++stats_.caller_blocks;
  cv_done_.wait(lock, done);
  caller_blocked_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker_finished() {
  if (!caller_blocked_.load()) return;
  std::lock_guard lock(mu_);
  cv_done_.notify_one();
}

void ThreadPool::rethrow_first(std::exception_ptr mine) {
  std::exception_ptr error = mine ? mine : error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    ++stats_.inline_jobs;
    fn(0, 0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  publish(++counter_ << 1);
  // The workers hold a reference to fn: even if our chunk throws, wait for them
  // before leaving.
  std::exception_ptr mine;
  try {
    run_range(fn, 0, n_threads_, n);
  } catch (...) {
    mine = std::current_exception();
  }
  wait_done([this] { return pending_.load() == 0; });
  job_ = nullptr;
  rethrow_first(mine);
}

void ThreadPool::run_chunks(int index) {
  for (int64_t c = chunk_next_.fetch_add(1, std::memory_order_relaxed); c < chunk_n_;
       c = chunk_next_.fetch_add(1, std::memory_order_relaxed))
    (*chunk_job_)(index, c);
}

void ThreadPool::parallel_chunks(int64_t n_chunks, const std::function<void(int, int64_t)>& fn, bool worth_waking) {
  if (n_chunks <= 0) return;
  if (n_threads_ == 1 || n_chunks == 1 || !worth_waking) {
    ++stats_.inline_jobs;
    for (int64_t c = 0; c < n_chunks; ++c) fn(0, c);
    return;
  }
  chunk_job_ = &fn;
  chunk_n_ = n_chunks;
  chunk_next_.store(0, std::memory_order_relaxed);
  ++counter_;
  gate_.store((counter_ << 32) | kOpen, std::memory_order_release);  // before the word that names it
  publish((counter_ << 1) | 1);
  std::exception_ptr mine;
  try {
    run_chunks(0);
  } catch (...) {
    mine = std::current_exception();
    chunk_next_.store(n_chunks, std::memory_order_relaxed);  // the others stop after their chunk
  }
  // Close the job: workers that have not joined yet skip it; wait for those inside.
  gate_.fetch_and(~kOpen);
  wait_done([this] { return (gate_.load() & kInside) == 0; });
  chunk_job_ = nullptr;
  rethrow_first(mine);
}

void ThreadPool::worker(int index) {
  AdaptiveSpin spin;
  uint64_t seen = 0;  // the constructor's word: a job published before this thread started is not missed
  // seq_cst loads: in the blocking path they follow the increment of sleepers_.
  const auto ready = [&] { return gen_word_.load() != seen || stop_.load(); };
  for (;;) {
    if (!spin_until(ready, spin)) {
      std::unique_lock lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst: before the loads of the word (publish() does the reverse)
      if (!ready()) worker_blocks_.fetch_add(1, std::memory_order_relaxed);
      cv_start_.wait(lock, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = gen_word_.load(std::memory_order_acquire);
    std::exception_ptr error;
    if ((seen & 1) == 0) {  // parallel_for: every worker takes its range; the caller waits for all
      try {
        run_range(*job_, index, n_threads_, job_n_);
      } catch (...) {
        error = std::current_exception();
      }
      if (error) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::move(error);
        error = nullptr;  // released here, before the caller may rethrow and free it
      }
      if (pending_.fetch_sub(1) == 1) worker_finished();
      continue;
    }
    // parallel_chunks: join only the job this word names, and only while it is open.
    const uint64_t id = (seen >> 1) << 32;
    uint64_t g = gate_.load(std::memory_order_relaxed);
    bool joined = false;
    while ((g & ~(kOpen | kInside)) == id && (g & kOpen) != 0) {
      if (gate_.compare_exchange_weak(g, g + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    try {
      run_chunks(index);
    } catch (...) {
      error = std::current_exception();
      chunk_next_.store(chunk_n_, std::memory_order_relaxed);
    }
    if (error) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::move(error);
      error = nullptr;  // released here, before the caller may rethrow and free it
    }
    const uint64_t before = gate_.fetch_sub(1);  // seq_cst, then the load of caller_blocked_
    if ((before & kInside) == 1 && (before & kOpen) == 0) worker_finished();
  }
}

}  // namespace ns
