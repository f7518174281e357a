// A fixed pool of worker threads for data-parallel loops in the forward pass.
// parallel_for blocks until every chunk is done; the calling thread takes part.
// Not reentrant: one parallel_for at a time per pool. If fn throws, the first
// exception is rethrown by parallel_for once every thread has finished its chunk.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ns {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads including the caller; <=0 means hardware_concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index, begin, end) over [0, n) split into size() contiguous ranges.
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // first exception thrown by a chunk of the current job
};

}  // namespace ns
