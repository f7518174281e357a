#include "engine/stream/pread_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ns::stream {

uint32_t PreadReader::threads_for(const ReaderOptions& opts) { return std::clamp<uint32_t>(opts.queue_depth, 1, 16); }

PreadReader::PreadReader(const std::vector<std::string>& paths, const ReaderOptions& opts)
    : Reader(paths, IoMode::pread, opts) {
  const uint32_t n = threads_for(opts_);
  threads_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

PreadReader::~PreadReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void PreadReader::wake() { cv_.notify_all(); }

bool PreadReader::register_with_engine(std::span<const iovec>, std::string*) {
  return false;  // nothing to gain: pread pins pages per call either way
}

void PreadReader::run() {
  set_io_thread_priority();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (stop_) {
      cancel(pending_);
      return;
    }
    Chunk c;
    if (!carve(pending_, c)) continue;
    chunk_started();
    lock.unlock();

    const OpenFile& f = file_of(c);
    int err = 0;
    uint64_t err_offset = 0;
    Step step;
    do {
      const Target t = target_of(c, f);
      const ssize_t r = ::pread(t.direct ? f.direct_fd : f.buffered_fd, t.dst, t.len, static_cast<off_t>(t.offset));
      step = advance(c, r < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(r), &err, &err_offset);
    } while (step == Step::again);

    lock.lock();
    chunk_done(c, step == Step::failed, err, err_offset);
    chunk_ended();
  }
}

}  // namespace ns::stream
