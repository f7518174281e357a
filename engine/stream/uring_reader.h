// The io_uring engine of Reader (see reader.h for the contract).
//
// Why a dedicated I/O thread owns the ring, rather than the compute thread
// submitting and reaping between matmuls: with a bounded queue depth, a read
// of an expert is several chunks, and the next chunk can only go out when one
// comes back. A compute thread busy in a matmul for tens of milliseconds would
// leave the disk idle; the I/O thread keeps the queue full, continues short
// reads and retries at once, and is asleep in io_uring_enter otherwise. The
// compute threads never touch the ring, so it needs no lock (one issuer).
// Submitters hand ops over through the intrusive pending queue and an eventfd
// that the ring itself is reading, so one wait covers both wake-ups; waiters
// block on the op's own futex.
//
// Registered files always; registered buffers when the owner of the buffers
// registers them (pages are then pinned once, not per read).
#pragma once

#include <liburing.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/stream/reader.h"

namespace ns::stream {

class UringReader final : public Reader {
 public:
  // nullptr, with *why_not set, if the ring cannot be set up here; throws
  // Error(io) if a file cannot be opened.
  static std::unique_ptr<UringReader> try_open(const std::vector<std::string>& paths, const ReaderOptions& opts,
                                               std::string* why_not);
  ~UringReader() override;

 private:
  UringReader(const std::vector<std::string>& paths, const ReaderOptions& opts);
  bool setup(std::string* why_not);
  void wake() override;
  bool register_with_engine(std::span<const iovec> buffers, std::string* why_not) override;

  void run();              // the I/O thread
  void arm_wakeup();       // a read of the eventfd, completed by wake()
  void prepare(Chunk* c);  // an SQE for the chunk's next bytes

  io_uring ring_{};
  bool ring_ready_ = false;
  int event_fd_ = -1;
  uint64_t event_buf_ = 0;
  bool files_registered_ = false;
  std::vector<Chunk> chunks_;  // queue_depth completion objects; user_data points here
  std::vector<Chunk*> free_chunks_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace ns::stream
