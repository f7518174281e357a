#include "engine/stream/reader.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/stream/pread_reader.h"
#include "engine/stream/uring_reader.h"

namespace ns::stream {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A chunk that keeps getting -EAGAIN is not going to succeed.
constexpr uint32_t kMaxRetries = 1000;

}  // namespace

const char* io_mode_name(IoMode m) { return m == IoMode::uring ? "uring" : "pread"; }

IoMode parse_io_mode(std::string_view s) {
  if (s == "uring") return IoMode::uring;
  if (s == "pread") return IoMode::pread;
  throw Error(ErrorKind::invalid_input, "io_mode '" + std::string(s) + "' is not known: use uring or pread");
}

UringProbe probe_uring() {
  UringProbe p;
  io_uring ring;
  const int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) {
    p.reason = std::string("io_uring_setup failed: ") + std::strerror(-r) +
               (r == -ENOSYS  ? " (kernel without io_uring, or a seccomp filter blocks it)"
                : r == -EPERM ? " (sysctl kernel.io_uring_disabled, or a sandbox forbids it)"
                              : "");
    return p;
  }
  if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
    const bool ok =
        io_uring_opcode_supported(probe, IORING_OP_READ) && io_uring_opcode_supported(probe, IORING_OP_READ_FIXED);
    io_uring_free_probe(probe);
    if (!ok) p.reason = "this kernel's io_uring lacks IORING_OP_READ (needs Linux 5.6 or later)";
  } else {
    p.reason = "this kernel's io_uring cannot be probed (needs Linux 5.6 or later)";
  }
  if (p.reason.empty()) {
    // Some sandboxes accept the setup call but never complete anything: run one no-op.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_nop(sqe);
    io_uring_cqe* cqe = nullptr;
    int s = io_uring_submit(&ring);
    if (s == 1) s = io_uring_wait_cqe(&ring, &cqe);
    if (s < 0 || cqe == nullptr)
      p.reason = std::string("io_uring does not complete requests here: ") + std::strerror(s < 0 ? -s : EIO);
    else
      io_uring_cqe_seen(&ring, cqe);
  }
  io_uring_queue_exit(&ring);
  p.available = p.reason.empty();
  return p;
}

// ---- OpQueue ----

void Reader::OpQueue::push(ReadOp* op) {
  op->next_ = nullptr;
  if (tail)
    tail->next_ = op;
  else
    head = op;
  tail = op;
}

void Reader::OpQueue::append(OpQueue& other) {
  if (other.empty()) return;
  if (tail)
    tail->next_ = other.head;
  else
    head = other.head;
  tail = other.tail;
  other.head = other.tail = nullptr;
}

ReadOp* Reader::OpQueue::pop() {
  ReadOp* op = head;
  if (op) {
    head = op->next_;
    if (!head) tail = nullptr;
    op->next_ = nullptr;
  }
  return op;
}

// ---- Reader ----

Reader::Reader(const std::vector<std::string>& paths, IoMode mode, const ReaderOptions& opts)
    : mode_(mode), opts_(opts) {
  if (paths.empty()) throw Error(ErrorKind::internal, "Reader: no files to read");
  if (opts_.queue_depth == 0) opts_.queue_depth = 1;
  if (opts_.max_chunk_bytes == 0 || opts_.max_chunk_bytes > (1ull << 30)) opts_.max_chunk_bytes = 1ull << 30;
  opts_.max_chunk_bytes = std::max(kDirectIoAlign, align_down(opts_.max_chunk_bytes));
  files_.reserve(paths.size());
  for (const std::string& path : paths) {
    OpenFile f;
    f.path = path;
    f.buffered_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.buffered_fd < 0) {
      const int e = errno;
      for (OpenFile& g : files_) {
        if (g.direct_fd >= 0) ::close(g.direct_fd);
        ::close(g.buffered_fd);
      }
      throw Error(ErrorKind::io, path + ": cannot open for reading: " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(f.buffered_fd, &st) == 0 && S_ISREG(st.st_mode)) {
      f.size = static_cast<uint64_t>(st.st_size);
      f.size_known = true;
    }
    if (opts_.direct) {
      f.direct_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (f.direct_fd < 0)
        spdlog::warn(
            "{}: O_DIRECT refused ({}); reading through the page cache, which the memory budget does not "
            "cover. Put the model on a filesystem that supports direct I/O (ext4, xfs, btrfs; not tmpfs).",
            path, std::strerror(errno));
    }
    files_.push_back(std::move(f));
  }
}

Reader::~Reader() {
  for (OpenFile& f : files_) {
    if (f.direct_fd >= 0) ::close(f.direct_fd);
    if (f.buffered_fd >= 0) ::close(f.buffered_fd);
  }
}

bool Reader::register_buffers(std::span<const iovec> buffers) {
  if (outstanding_.load(std::memory_order_acquire) != 0)
    throw Error(ErrorKind::internal, "Reader::register_buffers called with reads in flight");
  std::string why;
  for (const iovec& v : buffers)
    if (v.iov_len > (1ull << 30) || v.iov_len == 0) why = "a buffer is empty or over io_uring's 1 GiB limit";
  if (!why.empty() || !register_with_engine(buffers, &why)) {
    registered_.clear();
    if (!why.empty())
      spdlog::warn(
          "io_uring could not register the read buffers ({}); reading without them costs some "
          "CPU per read. Raise RLIMIT_MEMLOCK (LimitMEMLOCK= in the unit) to allow it.",
          why);
    return false;
  }
  registered_.assign(buffers.begin(), buffers.end());
  return true;
}

bool Reader::fixed_buffer_ok(const ReadOp& op) const {
  if (registered_.empty() || op.buffer_index_ < 0) return false;
  if (static_cast<size_t>(op.buffer_index_) >= registered_.size())
    throw Error(ErrorKind::internal, "ReadOp names registered buffer " + std::to_string(op.buffer_index_) + " of " +
                                         std::to_string(registered_.size()));
  const iovec& v = registered_[static_cast<size_t>(op.buffer_index_)];
  const auto* lo = static_cast<const uint8_t*>(v.iov_base);
  if (op.buffer_ < lo || op.buffer_ + op.span_ > lo + v.iov_len)
    throw Error(ErrorKind::internal,
                "ReadOp buffer lies outside registered buffer " + std::to_string(op.buffer_index_));
  return true;
}

void Reader::submit(ReadOp& op) {
  ReadOp* p = &op;
  submit(std::span<ReadOp* const>(&p, 1));
}

void Reader::submit(std::span<ReadOp* const> ops) {
  OpQueue q;
  for (ReadOp* op : ops) {
    if (op->state_.load(std::memory_order_acquire) == ReadOp::State::queued)
      throw Error(ErrorKind::internal, "ReadOp submitted while already queued");
    if (op->file_ >= files_.size())
      throw Error(ErrorKind::internal,
                  "ReadOp names file " + std::to_string(op->file_) + " of " + std::to_string(files_.size()));
    if (!is_aligned(reinterpret_cast<uintptr_t>(op->buffer_)) || op->capacity_ < op->span_)
      throw Error(ErrorKind::internal, "ReadOp buffer must be 4096-aligned and hold " + std::to_string(op->span_) +
                                           " bytes (has " + std::to_string(op->capacity_) + ")");
    op->fixed_index_ = fixed_buffer_ok(*op) ? op->buffer_index_ : -1;
    op->carved_ = 0;
    op->in_flight_ = 0;
    op->failed_ = false;
    op->err_ = 0;
    op->err_offset_ = 0;
    op->next_ = nullptr;
    op->state_.store(ReadOp::State::queued, std::memory_order_relaxed);
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    const OpenFile& f = files_[op->file_];
    if (op->length_ == 0) {
      finish(*op);
    } else if (f.size_known && op->offset_ + op->length_ > f.size) {
      op->failed_ = true;
      op->err_offset_ = f.size;
      finish(*op);
    } else {
      q.push(op);
    }
  }
  if (q.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.append(q);
  }
  wake();
}

void Reader::wait_finished(const ReadOp& op) const {
  for (;;) {
    const ReadOp::State s = op.state_.load(std::memory_order_acquire);
    if (s != ReadOp::State::queued) return;
    op.state_.wait(s, std::memory_order_acquire);
  }
}

void Reader::wait(ReadOp& op) {
  wait_finished(op);
  if (op.state() == ReadOp::State::failed) throw error_of(op);
}

size_t Reader::wait_any(std::span<ReadOp* const> ops) const {
  if (ops.empty()) throw Error(ErrorKind::internal, "Reader::wait_any with no ops");
  for (;;) {
    const uint32_t seen = epoch_.load(std::memory_order_acquire);
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]->state() != ReadOp::State::queued) return i;
    epoch_.wait(seen, std::memory_order_acquire);
  }
}

Error Reader::error_of(const ReadOp& op) const {
  const OpenFile& f = files_.at(op.file_);
  const std::string what =
      f.path + ": read of " + std::to_string(op.length_) + " bytes at offset " + std::to_string(op.offset_) + " failed";
  if (op.err_ == 0)
    return Error(ErrorKind::io, what + ": the file ends at byte " + std::to_string(op.err_offset_) +
                                    " (truncated, or changed since it was loaded); restore the complete file");
  if (op.err_ == ECANCELED) return Error(ErrorKind::io, what + ": the reader shut down before the read ran");
  return Error(ErrorKind::io, what + " at offset " + std::to_string(op.err_offset_) + ": " + std::strerror(op.err_) +
                                  "; check the disk (dmesg) and the file");
}

ReaderStats Reader::stats() const {
  ReaderStats s;
  s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  s.reads = reads_.load(std::memory_order_relaxed);
  s.chunks = chunks_.load(std::memory_order_relaxed);
  s.short_reads = short_reads_.load(std::memory_order_relaxed);
  s.retries = retries_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.busy_ns = busy_ns_.load(std::memory_order_relaxed);
  if (const uint64_t since = busy_start_.load(std::memory_order_relaxed)) {
    const uint64_t now = now_ns();
    if (now > since) s.busy_ns += now - since;
  }
  return s;
}

void Reader::finish(ReadOp& op) {
  reads_.fetch_add(1, std::memory_order_relaxed);
  if (op.failed_) failed_.fetch_add(1, std::memory_order_relaxed);
  outstanding_.fetch_sub(1, std::memory_order_relaxed);
  op.state_.store(op.failed_ ? ReadOp::State::failed : ReadOp::State::done, std::memory_order_release);
  op.state_.notify_all();
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
}

bool Reader::carve(OpQueue& q, Chunk& c) {
  while (ReadOp* op = q.head) {
    if (op->failed_) {
      q.pop();
      op->carved_ = op->span_;
      if (op->in_flight_ == 0) finish(*op);
      continue;
    }
    const uint64_t len = std::min(opts_.max_chunk_bytes, op->span_ - op->carved_);
    c = Chunk{op, op->carved_, len, 0, 0};
    op->carved_ += len;
    ++op->in_flight_;
    if (op->carved_ == op->span_) q.pop();
    return true;
  }
  return false;
}

Reader::Target Reader::target_of(const Chunk& c, const OpenFile& f) {
  const ReadOp& op = *c.op;
  Target t;
  t.file = op.file_;
  t.offset = op.start_ + c.pos + c.got;
  t.dst = op.buffer_ + c.pos + c.got;
  t.len = static_cast<uint32_t>(c.len - c.got);
  // A short count that is not a block multiple leaves the rest unaligned: the
  // buffered descriptor reads that tail.
  t.direct =
      f.direct_fd >= 0 && is_aligned(t.offset) && is_aligned(reinterpret_cast<uintptr_t>(t.dst)) && is_aligned(t.len);
  t.fixed_index = op.fixed_index_;
  return t;
}

Reader::Step Reader::advance(Chunk& c, int64_t res, int* err, uint64_t* err_offset) {
  const ReadOp& op = *c.op;
  const uint64_t at = op.start_ + c.pos + c.got;
  if (res == -EAGAIN || res == -EINTR) {
    retries_.fetch_add(1, std::memory_order_relaxed);
    if (++c.retries <= kMaxRetries) return Step::again;
  }
  if (res < 0) {
    *err = static_cast<int>(-res);
    *err_offset = at;
    return Step::failed;
  }
  c.retries = 0;
  c.got += static_cast<uint64_t>(res);
  bytes_read_.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
  // The aligned tail past the requested range may lie past EOF: only need_ bytes must arrive.
  const uint64_t needed = op.need_ > c.pos ? std::min(c.len, op.need_ - c.pos) : 0;
  if (c.got >= needed) return Step::finished;
  if (res == 0) {
    *err = 0;
    *err_offset = at;
    return Step::failed;
  }
  short_reads_.fetch_add(1, std::memory_order_relaxed);
  return Step::again;
}

void Reader::chunk_done(Chunk& c, bool failed, int err, uint64_t err_offset) {
  ReadOp& op = *c.op;
  if (failed && !op.failed_) {
    op.failed_ = true;
    op.err_ = err;
    op.err_offset_ = err_offset;
  }
  --op.in_flight_;
  if (op.in_flight_ == 0 && op.carved_ == op.span_) finish(op);
}

void Reader::cancel(OpQueue& q) {
  while (ReadOp* op = q.pop()) {
    if (!op->failed_) {
      op->failed_ = true;
      op->err_ = ECANCELED;
      op->err_offset_ = op->start_ + op->carved_;
    }
    op->carved_ = op->span_;
    if (op->in_flight_ == 0) finish(*op);
  }
}

void Reader::chunk_started() {
  chunks_.fetch_add(1, std::memory_order_relaxed);
  if (in_flight_chunks_++ == 0) {
    busy_since_ns_ = now_ns();
    busy_start_.store(busy_since_ns_, std::memory_order_relaxed);
  }
}

void Reader::chunk_ended() {
  if (--in_flight_chunks_ == 0) {
    busy_ns_.fetch_add(now_ns() - busy_since_ns_, std::memory_order_relaxed);
    busy_start_.store(0, std::memory_order_relaxed);
  }
}

void Reader::set_io_thread_priority() const {
  if (opts_.io_nice == 0) return;
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), opts_.io_nice) != 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      spdlog::info(
          "the I/O thread runs at normal priority (nice {} refused: {}); under heavy CPU load reads may "
          "wait behind compute. Allow it with CAP_SYS_NICE (systemd: LimitNICE=).",
          opts_.io_nice, std::strerror(errno));
  }
}

std::unique_ptr<Reader> make_reader(const std::vector<std::string>& paths, const ReaderOptions& opts) {
  if (opts.mode == IoMode::uring) {
    const UringProbe probe = probe_uring();
    std::string why = probe.reason;
    if (probe.available) {
      if (auto r = UringReader::try_open(paths, opts, &why)) return r;
    }
    spdlog::warn(
        "io_uring is unavailable ({}); reading with pread on {} threads instead, which is slower. "
        "Use Linux 5.6+ with io_uring allowed (sysctl kernel.io_uring_disabled=0; containers: the seccomp "
        "profile), or set io_mode: pread to silence this.",
        why, PreadReader::threads_for(opts));
  }
  return std::make_unique<PreadReader>(paths, opts);
}

}  // namespace ns::stream
