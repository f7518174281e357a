// The pread(2) engine of Reader (see reader.h for the contract): the fallback
// where io_uring is unavailable, and a baseline for the bench. A few threads
// each take the next chunk of the oldest queued op and read it with blocking
// pread calls; the number of threads is the queue depth (at most 16).
#pragma once

#include <condition_variable>
#include <string>
#include <thread>
#include <vector>

#include "engine/stream/reader.h"

namespace ns::stream {

class PreadReader final : public Reader {
 public:
  PreadReader(const std::vector<std::string>& paths, const ReaderOptions& opts);
  ~PreadReader() override;

  static uint32_t threads_for(const ReaderOptions& opts);

 private:
  void wake() override;
  bool register_with_engine(std::span<const iovec> buffers, std::string* why_not) override;
  void run();

  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace ns::stream
