#include "engine/util/thread_pool.h"

#include <algorithm>

namespace ns {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

static void run_chunk(const std::function<void(int, int64_t, int64_t)>& fn, int index, int n_threads,
                      int64_t n) {
  const int64_t per = (n + n_threads - 1) / n_threads;
  const int64_t begin = std::min<int64_t>(n, per * index);
  const int64_t end = std::min<int64_t>(n, begin + per);
  if (begin < end) fn(index, begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  cv_start_.notify_all();
  // The workers hold a reference to fn: even if our chunk throws, wait for them
  // before leaving.
  std::exception_ptr mine;
  try {
    run_chunk(fn, 0, n_threads_, n);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  std::exception_ptr error = mine ? mine : error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int64_t, int64_t)>* fn;
    int64_t n;
    {
      std::unique_lock lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = job_;
      n = job_n_;
    }
    std::exception_ptr error;
    try {
      run_chunk(*fn, index, n_threads_, n);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      if (error && !error_) error_ = error;
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

}  // namespace ns
