// Streaming figures for a run or a job: what the reader and the expert cache
// counted, with the derived rates the CLI and the database report
// (bytes_read, read_gib_s, io_wait_ms, cache_hit_rate, prefetch_accuracy).
// Per-job figures are the difference of two snapshots.
#pragma once

#include <cstdint>
#include <string>

#include "engine/stream/expert_cache.h"
#include "engine/stream/reader.h"

namespace ns::stream {

struct StreamStats {
  ReaderStats reader;
  CacheStats cache;

  uint64_t bytes_read() const { return reader.bytes_read; }
  double read_gib_s() const { return reader.read_gib_per_s(); }  // while reads were in flight
  double read_ms() const { return reader.busy_ns * 1e-6; }
  double io_wait_ms() const { return cache.io_wait_ns * 1e-6; }  // compute blocked on reads
  double cache_hit_rate() const { return cache.hit_rate(); }
  double prefetch_accuracy() const { return cache.prefetch_accuracy(); }

  // "read 1.23 GiB in 812 ms (1.52 GiB/s), waited 140 ms, cache hits 63.1% (...), prefetch ..."
  std::string summary() const;
};

// The counters now; cache may be null (no streamed experts).
StreamStats snapshot(const Reader& reader, const ExpertCache* cache);

// Counter-wise a - b (a taken after b).
StreamStats operator-(const StreamStats& a, const StreamStats& b);

}  // namespace ns::stream
