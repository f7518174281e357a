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
  rethrow_first(mine);
}

void ThreadPool::rethrow_first(std::exception_ptr mine) {
  std::exception_ptr error = mine ? mine : error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void ThreadPool::run_chunks(int index) {
  for (int64_t c = chunk_next_.fetch_add(1, std::memory_order_relaxed); c < chunk_n_;
       c = chunk_next_.fetch_add(1, std::memory_order_relaxed))
    (*chunk_job_)(index, c);
}

void ThreadPool::parallel_chunks(int64_t n_chunks, const std::function<void(int, int64_t)>& fn) {
  if (n_chunks <= 0) return;
  if (n_threads_ == 1 || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; ++c) fn(0, c);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = nullptr;
    chunk_job_ = &fn;
    chunk_n_ = n_chunks;
    chunk_next_.store(0, std::memory_order_relaxed);
    chunk_open_ = true;
    chunk_joined_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  cv_start_.notify_all();
  std::exception_ptr mine;
  try {
    run_chunks(0);
  } catch (...) {
    mine = std::current_exception();
    chunk_next_.store(n_chunks, std::memory_order_relaxed);  // the others stop after their chunk
  }
  // Close the job: workers that have not joined yet skip it; wait for those inside.
  std::unique_lock lock(mu_);
  chunk_open_ = false;
  cv_done_.wait(lock, [this] { return chunk_joined_ == 0; });
  chunk_job_ = nullptr;
  rethrow_first(mine);
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
      if (!fn) {  // a parallel_chunks job: join it if it is still open
        if (!chunk_open_) continue;
        ++chunk_joined_;
      }
    }
    if (!fn) {
      std::exception_ptr error;
      try {
        run_chunks(index);
      } catch (...) {
        error = std::current_exception();
        chunk_next_.store(chunk_n_, std::memory_order_relaxed);
      }
      std::lock_guard lock(mu_);
      if (error && !error_) error_ = error;
      if (--chunk_joined_ == 0 && !chunk_open_) cv_done_.notify_one();
      continue;
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
