// A fixed pool of worker threads for data-parallel loops in the forward pass.
// parallel_for blocks until every chunk is done; the calling thread takes part.
// Not reentrant: one parallel_for at a time per pool. If fn throws, the first
// exception is rethrown by parallel_for once every thread has finished its chunk.
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

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads including the caller; <=0 means hardware_concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index, begin, end) over [0, n) split into size() contiguous ranges.
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);
  // Calls fn(thread_index, chunk) for every chunk in [0, n_chunks), handing
  // chunks out one at a time to whichever thread is free. On a machine shared
  // with other work a thread the OS has paused delays only its current chunk
  // (the others take the rest), and a worker that has not woken up by the time
  // the chunks run out is not waited for. Use where chunks are independent and
  // which thread runs one does not matter.
  void parallel_chunks(int64_t n_chunks, const std::function<void(int, int64_t)>& fn);

 private:
  void worker(int index);
  void run_chunks(int index);  // the dynamic job's loop
  // Under mu_, once a job's workers are done: rethrows the caller's own
  // exception `mine`, else the first a worker threw (clearing it).
  void rethrow_first(std::exception_ptr mine);
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
  // The current parallel_chunks job: open while workers may still join it.
  const std::function<void(int, int64_t)>* chunk_job_ = nullptr;
  int64_t chunk_n_ = 0;
  std::atomic<int64_t> chunk_next_{0};
  bool chunk_open_ = false;
  int chunk_joined_ = 0;  // workers inside the chunk job
};

}  // namespace ns
