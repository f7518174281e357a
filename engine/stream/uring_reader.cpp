#include "engine/stream/uring_reader.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace ns::stream {

std::unique_ptr<UringReader> UringReader::try_open(const std::vector<std::string>& paths, const ReaderOptions& opts,
                                                   std::string* why_not) {
  std::unique_ptr<UringReader> r(new UringReader(paths, opts));
  if (!r->setup(why_not)) return nullptr;
  return r;
}

UringReader::UringReader(const std::vector<std::string>& paths, const ReaderOptions& opts)
    : Reader(paths, IoMode::uring, opts) {}

bool UringReader::setup(std::string* why_not) {
  const uint32_t depth = opts_.queue_depth;
  // One SQE per chunk in flight plus the eventfd read; completions cannot overflow.
  int r = io_uring_queue_init(depth + 1, &ring_, 0);
  if (r < 0) {
    *why_not = std::string("io_uring_queue_init(") + std::to_string(depth + 1) + "): " + std::strerror(-r);
    return false;
  }
  ring_ready_ = true;
  event_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (event_fd_ < 0) {
    *why_not = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  if (opts_.register_files) {
    std::vector<int> fds;
    for (const OpenFile& f : files_) {
      fds.push_back(f.direct_fd);
      fds.push_back(f.buffered_fd);
    }
    // -1 entries are allowed (sparse) from 5.5; a failure only costs a file reference per read.
    files_registered_ = io_uring_register_files(&ring_, fds.data(), static_cast<unsigned>(fds.size())) == 0;
  }
  chunks_.resize(depth);
  free_chunks_.reserve(depth);
  for (Chunk& c : chunks_) free_chunks_.push_back(&c);
  thread_ = std::thread([this] { run(); });
  return true;
}

UringReader::~UringReader() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake();
    thread_.join();
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void UringReader::wake() {
  const uint64_t one = 1;
  // The counter saturates rather than blocks long before 2^64 wake-ups; EINTR is retried.
  while (::write(event_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

bool UringReader::register_with_engine(std::span<const iovec> buffers, std::string* why_not) {
  io_uring_unregister_buffers(&ring_);  // a previous registration, if any
  const int r = io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
  if (r < 0) {
    *why_not = std::string("io_uring_register_buffers: ") + std::strerror(-r);
    return false;
  }
  return true;
}

void UringReader::arm_wakeup() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  io_uring_prep_read(sqe, event_fd_, &event_buf_, sizeof event_buf_, 0);
  io_uring_sqe_set_data(sqe, nullptr);  // user_data 0: the wake-up, not a chunk
}

void UringReader::prepare(Chunk* c) {
  const OpenFile& f = file_of(*c);
  const Target t = target_of(*c, f);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never null: the ring has depth + 1 entries
  int fd = t.direct ? f.direct_fd : f.buffered_fd;
  if (files_registered_) fd = static_cast<int>(2 * t.file + (t.direct ? 0 : 1));
  if (t.fixed_index >= 0)
    io_uring_prep_read_fixed(sqe, fd, t.dst, t.len, t.offset, t.fixed_index);
  else
    io_uring_prep_read(sqe, fd, t.dst, t.len, t.offset);
  if (files_registered_) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, c);
}

void UringReader::run() {
  OpQueue local;  // ops taken from pending_, oldest first
  bool stopping = false;
  unsigned unsubmitted = 1;
  set_io_thread_priority();
  arm_wakeup();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      local.append(pending_);
      stopping = stop_;
    }
    if (stopping) cancel(local);
    Chunk c;
    while (!free_chunks_.empty() && carve(local, c)) {
      Chunk* slot = free_chunks_.back();
      free_chunks_.pop_back();
      *slot = c;
      chunk_started();
      prepare(slot);
      ++unsubmitted;
    }
    if (unsubmitted > 0) {
      const int r = io_uring_submit(&ring_);
      if (r >= 0) {
        unsubmitted = 0;
      } else {
        // The kernel is short of resources (or interrupted): the SQEs stay in
        // the ring and go out on the next round. With nothing in flight no
        // completion would wake us, so pause briefly instead of waiting.
        if (r != -EAGAIN && r != -EBUSY && r != -EINTR) spdlog::error("io_uring_submit: {}", std::strerror(-r));
        if (free_chunks_.size() == chunks_.size()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
      }
    }
    if (stopping && free_chunks_.size() == chunks_.size()) break;

    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(&ring_, &cqe);
    if (w < 0) {
      if (w != -EINTR && w != -EAGAIN) spdlog::error("io_uring_wait_cqe: {}", std::strerror(-w));
      continue;
    }
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      auto* chunk = static_cast<Chunk*>(io_uring_cqe_get_data(cqe));
      if (chunk == nullptr) {  // the eventfd read: re-arm it
        arm_wakeup();
        ++unsubmitted;
        continue;
      }
      int err = 0;
      uint64_t err_offset = 0;
      const Step step = advance(*chunk, cqe->res, &err, &err_offset);
      if (step == Step::again) {
        prepare(chunk);
        ++unsubmitted;
        continue;
      }
      chunk_done(*chunk, step == Step::failed, err, err_offset);
      chunk_ended();
      free_chunks_.push_back(chunk);
    }
    io_uring_cq_advance(&ring_, seen);
  }
}

}  // namespace ns::stream
