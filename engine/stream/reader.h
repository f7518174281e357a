// The streaming reader: reads (file, offset, length) ranges into caller
// buffers with O_DIRECT, many in flight, completions signalled per op.
//
// Two engines behind one interface, chosen by ReaderOptions::mode:
// - uring: one io_uring owned by a dedicated I/O thread (uring_reader.h);
// - pread: a few threads calling pread(2) (pread_reader.h), the fallback where
//   io_uring is unavailable (make_reader probes and logs a warning).
//
// Contract:
// - submit() queues ops and returns at once; reads overlap whatever the caller
//   does next. wait() blocks until one op finishes; wait_any() until one of
//   several has. Ops are read in submission order, split into chunks of at
//   most max_chunk_bytes, with at most queue_depth chunks in flight.
// - Short reads are continued, -EAGAIN/-EINTR retried. A read that fails
//   (EIO, the file ended early, ...) finishes its op as failed; wait() then
//   throws ns::Error(io) naming the file, the range and the failing offset.
//   Nothing aborts the process.
// - Thread-safe: submit/wait from any threads. No allocation after construction
//   (register_buffers aside): queuing is intrusive, waiting is a futex.
// - The destructor fails ops that have not started (ECANCELED) and waits for
//   the ones in flight, so buffers are never written after it returns.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/stream/read_op.h"
#include "common/error.h"

namespace ns::stream {

enum class IoMode { uring, pread };
const char* io_mode_name(IoMode m);
IoMode parse_io_mode(std::string_view s);  // "uring" | "pread"; throws Error(invalid_input)

struct ReaderOptions {
  IoMode mode = IoMode::uring;
  uint32_t queue_depth = 16;            // chunks in flight (the pread engine: threads, at most 16)
  uint64_t max_chunk_bytes = 1u << 20;  // larger reads are split; a multiple of 4096, at most 1 GiB
  bool direct = true;                   // O_DIRECT; falls back to buffered with a warning if refused
  bool register_files = true;           // io_uring fixed files
  // Nice value for the I/O thread(s). Below 0 so that compute threads on every
  // core do not delay resubmission: on a 2-core machine at load ~8, with 8 ms of
  // compute per range, the disk was busy 98.3 % of the time on average at -10
  // (worst run 96.7 %) against 95.5 % at 0 (worst 84.3 %), six runs each.
  // Lowering it needs CAP_SYS_NICE (systemd: LimitNICE=-10 or AmbientCapabilities);
  // where refused it is logged once and the thread runs at normal priority.
  // 0 leaves the thread alone.
  int io_nice = -10;
};

// Counters since construction. Busy time is wall time with at least one chunk
// in flight, so bytes_read / busy is the rate while reading.
struct ReaderStats {
  uint64_t bytes_read = 0;   // bytes that arrived (aligned supersets included)
  uint64_t reads = 0;        // ops finished (done or failed)
  uint64_t chunks = 0;       // chunk reads issued
  uint64_t short_reads = 0;  // continued after a short count
  uint64_t retries = 0;      // -EAGAIN / -EINTR resubmissions
  uint64_t failed = 0;       // ops that failed
  uint64_t busy_ns = 0;
  double read_gib_per_s() const { return busy_ns ? bytes_read / (busy_ns * 1e-9) / double(1ull << 30) : 0.0; }
};

// Whether this kernel and sandbox allow io_uring with IORING_OP_READ.
struct UringProbe {
  bool available = false;
  std::string reason;  // why not, when unavailable
};
UringProbe probe_uring();

class Reader {
 public:
  virtual ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  IoMode mode() const { return mode_; }
  const ReaderOptions& options() const { return opts_; }
  size_t n_files() const { return files_.size(); }
  const std::string& path(uint32_t file) const { return files_.at(file).path; }
  uint64_t file_size(uint32_t file) const { return files_.at(file).size; }  // at open
  bool direct(uint32_t file) const { return files_.at(file).direct_fd >= 0; }

  // Declares the buffers ops may name by buffer_index (io_uring fixed buffers:
  // pages pinned once instead of per read). Call with no op in flight. Returns
  // false, with a warning, where the kernel refuses (e.g. RLIMIT_MEMLOCK);
  // reads then simply do without (so too for an iovec over 1 GiB).
  bool register_buffers(std::span<const iovec> buffers);
  bool buffers_registered() const { return !registered_.empty(); }

  // Queues an op (prepared, not queued). Misuse (unaligned or small buffer,
  // bad file index, an op already queued) throws Error(internal); a range past
  // the end of the file finishes the op as failed at once.
  void submit(ReadOp& op);
  void submit(std::span<ReadOp* const> ops);

  // Blocks until op has finished; throws error_of(op) if it failed.
  void wait(ReadOp& op);
  // Blocks until op has finished, without throwing.
  void wait_finished(const ReadOp& op) const;
  // Blocks until one of the (submitted) ops has finished and returns its index.
  size_t wait_any(std::span<ReadOp* const> ops) const;
  // The ns::Error(io) describing a failed op.
  Error error_of(const ReadOp& op) const;

  ReaderStats stats() const;

 protected:
  struct OpenFile {
    std::string path;
    int direct_fd = -1;    // O_DIRECT, -1 where refused
    int buffered_fd = -1;  // unaligned continuations (and everything, without O_DIRECT)
    uint64_t size = 0;
    bool size_known = false;  // regular files; not block devices, directories, ...
  };

  // A piece of one op read as a unit: [pos, pos + len) of the op's aligned span.
  struct Chunk {
    ReadOp* op = nullptr;
    uint64_t pos = 0, len = 0, got = 0;
    uint32_t retries = 0;  // consecutive -EAGAIN/-EINTR
  };
  // Where a chunk's next bytes go.
  struct Target {
    uint32_t file = 0;
    bool direct = false;  // O_DIRECT fd (else the buffered one)
    uint64_t offset = 0;
    uint8_t* dst = nullptr;
    uint32_t len = 0;
    int32_t fixed_index = -1;
  };
  enum class Step { again, finished, failed };

  // FIFO of queued ops, linked through ReadOp::next_.
  struct OpQueue {
    ReadOp* head = nullptr;
    ReadOp* tail = nullptr;
    bool empty() const { return head == nullptr; }
    void push(ReadOp* op);
    void append(OpQueue& other);  // moves other's ops to the back
    ReadOp* pop();
  };

  Reader(const std::vector<std::string>& paths, IoMode mode, const ReaderOptions& opts);

  // Engine hooks. wake(): pending_ gained ops (called without mu_ held).
  // register_with_engine(): make the buffers usable for fixed reads, or say why not.
  virtual void wake() = 0;
  virtual bool register_with_engine(std::span<const iovec> buffers, std::string* why_not) = 0;

  // The next chunk of the oldest op of q. Ops that failed meanwhile are
  // dropped (and finished if idle). Returns false when q has nothing to read.
  bool carve(OpQueue& q, Chunk& c);
  static Target target_of(const Chunk& c, const OpenFile& f);
  const OpenFile& file_of(const Chunk& c) const { return files_[c.op->file_]; }
  // Accounts one read result (bytes, or -errno). again: read the rest of the
  // chunk; failed: *err / *err_offset say why (err 0 = end of file).
  Step advance(Chunk& c, int64_t res, int* err, uint64_t* err_offset);
  // The chunk is over (finished or failed); finishes its op when it was the last.
  void chunk_done(Chunk& c, bool failed, int err, uint64_t err_offset);
  // Fails every op of q that has no chunk in flight with ECANCELED (shutdown).
  void cancel(OpQueue& q);
  // Busy-time accounting: a chunk started / a chunk ended (I/O side only).
  void chunk_started();
  void chunk_ended();
  // Applies opts_.io_nice to the calling thread (an I/O thread).
  void set_io_thread_priority() const;

  std::vector<OpenFile> files_;
  IoMode mode_;
  ReaderOptions opts_;
  std::mutex mu_;    // guards pending_
  OpQueue pending_;  // submitted, not yet taken by the I/O side
  std::vector<iovec> registered_;

 private:
  void finish(ReadOp& op);
  bool fixed_buffer_ok(const ReadOp& op) const;

  uint32_t in_flight_chunks_ = 0;         // I/O side only
  std::atomic<uint32_t> outstanding_{0};  // ops submitted and not finished
  uint64_t busy_since_ns_ = 0;
  std::atomic<uint64_t> bytes_read_{0}, reads_{0}, chunks_{0}, short_reads_{0}, retries_{0}, failed_{0}, busy_ns_{0};
  std::atomic<uint64_t> busy_start_{0};     // non-zero while busy: when it began (for live stats)
  mutable std::atomic<uint32_t> epoch_{0};  // bumped on every finished op, for wait_any
};

// Opens `paths` (read-only) with the engine `opts.mode` asks for. Where uring
// is asked for but unavailable, logs a warning naming the reason and returns a
// pread reader. Throws Error(io) naming the path if a file cannot be opened.
std::unique_ptr<Reader> make_reader(const std::vector<std::string>& paths, const ReaderOptions& opts);

}  // namespace ns::stream
