#include "engine/stream/stream_stats.h"

#include <cstdio>

#include "common/human_size.h"

namespace ns::stream {

std::string StreamStats::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "read %s in %.0f ms (%.2f GiB/s while reading, %llu reads), waited %.0f ms; cache hits %.1f%% "
                "(%llu hits, %llu misses, %llu evictions)",
                format_size(bytes_read()).c_str(), read_ms(), read_gib_s(),
                static_cast<unsigned long long>(reader.reads), io_wait_ms(), 100.0 * cache_hit_rate(),
                static_cast<unsigned long long>(cache.hits), static_cast<unsigned long long>(cache.misses),
                static_cast<unsigned long long>(cache.evictions));
  std::string s = buf;
  if (cache.prefetch_requested) {
    std::snprintf(buf, sizeof buf, "; prefetch %.1f%% used (%llu read, %llu used, %llu evicted unused)",
                  100.0 * prefetch_accuracy(), static_cast<unsigned long long>(cache.prefetch_reads),
                  static_cast<unsigned long long>(cache.prefetch_used),
                  static_cast<unsigned long long>(cache.prefetch_wasted));
    s += buf;
  }
  if (reader.failed) s += "; " + std::to_string(reader.failed) + " reads failed";
  return s;
}

StreamStats snapshot(const Reader& reader, const ExpertCache* cache) {
  StreamStats s;
  s.reader = reader.stats();
  if (cache) s.cache = cache->stats();
  return s;
}

StreamStats operator-(const StreamStats& a, const StreamStats& b) {
  StreamStats d;
  d.reader.bytes_read = a.reader.bytes_read - b.reader.bytes_read;
  d.reader.reads = a.reader.reads - b.reader.reads;
  d.reader.chunks = a.reader.chunks - b.reader.chunks;
  d.reader.short_reads = a.reader.short_reads - b.reader.short_reads;
  d.reader.retries = a.reader.retries - b.reader.retries;
  d.reader.failed = a.reader.failed - b.reader.failed;
  d.reader.busy_ns = a.reader.busy_ns - b.reader.busy_ns;
  d.cache.hits = a.cache.hits - b.cache.hits;
  d.cache.misses = a.cache.misses - b.cache.misses;
  d.cache.evictions = a.cache.evictions - b.cache.evictions;
  d.cache.late_hits = a.cache.late_hits - b.cache.late_hits;
  d.cache.bytes_requested = a.cache.bytes_requested - b.cache.bytes_requested;
  d.cache.prefetch_requested = a.cache.prefetch_requested - b.cache.prefetch_requested;
  d.cache.prefetch_cached = a.cache.prefetch_cached - b.cache.prefetch_cached;
  d.cache.prefetch_reads = a.cache.prefetch_reads - b.cache.prefetch_reads;
  d.cache.prefetch_used = a.cache.prefetch_used - b.cache.prefetch_used;
  d.cache.prefetch_wasted = a.cache.prefetch_wasted - b.cache.prefetch_wasted;
  d.cache.prefetch_skipped = a.cache.prefetch_skipped - b.cache.prefetch_skipped;
  d.cache.io_wait_ns = a.cache.io_wait_ns - b.cache.io_wait_ns;
  return d;
}

}  // namespace ns::stream
