#include <doctest/doctest.h>

#include <string>

#include "engine/stream/stream_stats.h"

using namespace ns::stream;

TEST_CASE("derived figures and per-job differences") {
  StreamStats a;
  a.reader.bytes_read = 3ull << 30;
  a.reader.busy_ns = 2'000'000'000;  // 3 GiB in 2 s
  a.reader.reads = 700;
  a.cache.hits = 30;
  a.cache.misses = 10;
  a.cache.io_wait_ns = 250'000'000;
  a.cache.prefetch_requested = 20;
  a.cache.prefetch_reads = 8;
  a.cache.prefetch_used = 6;
  CHECK(a.read_gib_s() == doctest::Approx(1.5));
  CHECK(a.io_wait_ms() == doctest::Approx(250.0));
  CHECK(a.cache_hit_rate() == doctest::Approx(0.75));
  CHECK(a.prefetch_accuracy() == doctest::Approx(0.75));
  const std::string s = a.summary();
  CHECK(s.find("3.00 GiB") != std::string::npos);
  CHECK(s.find("1.50 GiB/s") != std::string::npos);
  CHECK(s.find("75.0%") != std::string::npos);
  CHECK(s.find("prefetch 75.0% used") != std::string::npos);

  StreamStats b;
  b.reader.bytes_read = 1ull << 30;
  b.reader.busy_ns = 1'500'000'000;
  b.cache.hits = 10;
  b.cache.misses = 0;
  const StreamStats d = a - b;
  CHECK(d.bytes_read() == 2ull << 30);
  CHECK(d.read_gib_s() == doctest::Approx(4.0));
  CHECK(d.cache_hit_rate() == doctest::Approx(2.0 / 3.0));

  StreamStats empty;
  CHECK(empty.read_gib_s() == 0.0);
  CHECK(empty.cache_hit_rate() == 0.0);
  CHECK(empty.prefetch_accuracy() == 0.0);
}
