// Streaming-read benchmark (run by stream_bench.sh, not by ctest).
//
//   ns_bench_stream read  FILE [--mode uring|pread] [--qd N] [--chunk BYTES] [--outstanding N]
//                         [--min SIZE] [--max SIZE] [--bytes SIZE] [--seed N] [--compute-ms X] [--io-nice N]
//   ns_bench_stream mmap  FILE [--min SIZE] [--max SIZE] [--bytes SIZE] [--seed N]
//   ns_bench_stream cache FILE [--mode M] [--qd N] [--chunk BYTES] [--layers 26] [--experts 64]
//                         [--used 6] [--batch 1] [--proj BYTES] [--capacity SIZE] [--policy lru|lfu]
//                         [--tokens N] [--compute-ms X] [--seed N]
//
// Both read expert-sized ranges (uniform in [min, max], 32-byte aligned offsets
// like GGUF tensors) in random order until `bytes` have been read. `read` goes
// through the streaming reader with `outstanding` ranges submitted at once
// (a layer's experts) and `qd` chunks in flight; with --compute-ms it then
// reads the same ranges again, spinning that long on each completed range while
// the others are read, and reports the share of the time the disk was busy. `mmap` copies the same ranges out of a
// mapping of the file: the page-cache path. `cache` lays a MoE model's expert
// stacks over the file (DeepSeek-V2-Lite's shape by default: 26 MoE layers,
// 64 experts, 1.62 MB per projection at Q4_0) and runs decode steps through
// the ExpertCache: per layer, `batch` tokens each route to `used` distinct
// experts drawn uniformly (balanced routing), acquire, wait_next, compute_ms
// of spinning per expert, release. Each prints one RESULT line of key=value
// pairs for the script.
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <memory>
#include <vector>

#include "engine/stream/buffer_pool.h"
#include "engine/stream/expert_cache.h"
#include "common/human_size.h"
#include "engine/stream/reader.h"
#include "common/error.h"
#include "tests/bench/bench_args.h"

using namespace ns::stream;
using ns::format_size;
using ns::parse_size;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string cmd, file;
  IoMode mode = IoMode::uring;
  uint32_t qd = 16, outstanding = 8;
  uint64_t chunk = 1u << 20, min = 2u << 20, max = 25u << 20, bytes = 4ull << 30;
  uint64_t seed = 1;
  double compute_ms = 0;
  int io_nice = ReaderOptions{}.io_nice;
  uint32_t layers = 26, experts = 64, used = 6, batch = 1, tokens = 40;
  uint64_t proj = 1622016;  // 2048 x 1408 at Q4_0 (18 bytes per 32 weights)
  uint64_t capacity = 2ull << 30;
  CachePolicy policy = CachePolicy::lfu;
};

struct Range {
  uint64_t offset, length;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<Range> make_ranges(const Args& a, uint64_t file_size) {
  if (a.max > file_size || a.min > a.max) throw ns::Error(ns::ErrorKind::invalid_input, "ranges do not fit the file");
  std::mt19937_64 rng(a.seed);
  std::vector<Range> out;
  uint64_t total = 0;
  while (total < a.bytes) {
    const uint64_t len = a.min + rng() % (a.max - a.min + 1);
    const uint64_t off = (rng() % (file_size - len + 1)) & ~uint64_t{31};
    out.push_back({off, len});
    total += len;
  }
  return out;
}

void spin_for(double ms) {
  const auto until = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  volatile uint64_t x = 0;
  while (Clock::now() < until) x = x + 1;
}

void print_result(const char* what, const Args& a, uint64_t bytes, double secs, const std::string& extra) {
  std::printf("RESULT kind=%s mode=%s qd=%u chunk=%llu outstanding=%u bytes=%llu seconds=%.4f gib_s=%.4f%s\n", what,
              a.cmd == "mmap" ? "mmap" : io_mode_name(a.mode), a.qd, static_cast<unsigned long long>(a.chunk),
              a.outstanding, static_cast<unsigned long long>(bytes), secs, bytes / secs / double(1ull << 30),
              extra.c_str());
}

// Reads the ranges keeping `outstanding` submitted; spins compute_ms per completed range.
double run_reader(Reader& r, BufferPool& pool, const std::vector<Range>& ranges, double compute_ms,
                  uint64_t* checksum) {
  const uint32_t n = pool.n_slots();
  std::vector<ReadOp> ops(n);
  std::vector<ReadOp*> active;
  std::vector<uint32_t> active_slot;
  size_t next = 0;
  const auto t0 = Clock::now();
  auto issue = [&](uint32_t slot) {
    const Range& g = ranges[next++];
    ops[slot].prepare(0, g.offset, g.length, pool.slot(slot), pool.slot_bytes(), pool.buffer_index(slot));
    r.submit(ops[slot]);
    active.push_back(&ops[slot]);
    active_slot.push_back(slot);
  };
  for (uint32_t s = 0; s < n && next < ranges.size(); ++s) issue(s);
  while (!active.empty()) {
    const size_t k = r.wait_any(active);
    ReadOp* op = active[k];
    const uint32_t slot = active_slot[k];
    if (!op->ok()) throw r.error_of(*op);
    *checksum += op->data()[0] + op->data()[op->length() - 1];
    active.erase(active.begin() + static_cast<long>(k));
    active_slot.erase(active_slot.begin() + static_cast<long>(k));
    // Compute on this range while the other outstanding ones are read; its slot is reused after.
    if (compute_ms > 0) spin_for(compute_ms);
    if (next < ranges.size()) issue(slot);
  }
  return seconds_since(t0);
}

// The reader of a.file with the options asked for.
std::unique_ptr<Reader> open_reader(const Args& a) {
  ReaderOptions o;
  o.mode = a.mode;
  o.queue_depth = a.qd;
  o.max_chunk_bytes = a.chunk;
  o.io_nice = a.io_nice;
  return make_reader({a.file}, o);
}

int cmd_read(const Args& a) {
  auto r = open_reader(a);
  const std::vector<Range> ranges = make_ranges(a, r->file_size(0));
  uint64_t requested = 0;
  for (const Range& g : ranges) requested += g.length;
  BufferPool pool(a.outstanding, direct_read_capacity(a.max));
  const bool registered = r->register_buffers(pool.iovecs());
  uint64_t checksum = 0;
  const ReaderStats s0 = r->stats();
  const double secs = run_reader(*r, pool, ranges, 0, &checksum);
  const ReaderStats s1 = r->stats();
  const double busy = (s1.busy_ns - s0.busy_ns) * 1e-9;
  char extra[256];
  std::snprintf(extra, sizeof extra, " busy_gib_s=%.4f registered=%d direct=%d reads=%zu checksum=%llu",
                (s1.bytes_read - s0.bytes_read) / busy / double(1ull << 30), registered ? 1 : 0, r->direct(0) ? 1 : 0,
                ranges.size(), static_cast<unsigned long long>(checksum));
  Args shown = a;
  shown.mode = r->mode();
  print_result("read", shown, requested, secs, extra);

  if (a.compute_ms > 0) {
    // Same ranges with compute in between: how much of the reading hides behind it.
    // busy_fraction: share of the wall time with reads in flight. Near 1 means
    // the compute never left the disk idle, whatever the disk's speed today.
    const auto c0 = Clock::now();
    for (size_t i = 0; i < ranges.size(); ++i) spin_for(a.compute_ms);
    const double compute = seconds_since(c0);
    const ReaderStats b0 = r->stats();
    const double both = run_reader(*r, pool, ranges, a.compute_ms, &checksum);
    const ReaderStats b1 = r->stats();
    const double busy_both = (b1.busy_ns - b0.busy_ns) * 1e-9;
    std::snprintf(extra, sizeof extra, " read_only_s=%.4f compute_only_s=%.4f busy_fraction=%.3f busy_gib_s=%.4f", secs,
                  compute, busy_both / both, (b1.bytes_read - b0.bytes_read) / busy_both / double(1ull << 30));
    print_result("overlap", shown, requested, both, extra);
  }
  return 0;
}

int cmd_mmap(const Args& a) {
  const int fd = ::open(a.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ns::Error(ns::ErrorKind::io, a.file + ": " + std::strerror(errno));
  const off_t size = ::lseek(fd, 0, SEEK_END);
  void* map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) throw ns::Error(ns::ErrorKind::io, a.file + ": mmap: " + std::strerror(errno));
  const std::vector<Range> ranges = make_ranges(a, static_cast<uint64_t>(size));
  std::vector<uint8_t> dst(a.max);
  uint64_t requested = 0, checksum = 0;
  const auto t0 = Clock::now();
  for (const Range& g : ranges) {
    std::memcpy(dst.data(), static_cast<const uint8_t*>(map) + g.offset, g.length);
    checksum += dst[0] + dst[g.length - 1];
    requested += g.length;
  }
  const double secs = seconds_since(t0);
  ::munmap(map, static_cast<size_t>(size));
  ::close(fd);
  char extra[128];
  std::snprintf(extra, sizeof extra, " reads=%zu checksum=%llu", ranges.size(),
                static_cast<unsigned long long>(checksum));
  print_result("read", a, requested, secs, extra);
  return 0;
}

int cmd_cache(const Args& a) {
  auto r = open_reader(a);
  // The expert stacks, back to back from a 32-byte-aligned (not 4096-aligned) start, as in a GGUF.
  std::vector<ns::gguf::TensorInfo> tensors;
  uint64_t at = 4096 + 32;
  static const char* kNames[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (uint32_t l = 0; l < a.layers; ++l)
    for (const char* n : kNames) {
      ns::gguf::TensorInfo t;
      t.name = "blk." + std::to_string(l) + "." + n + ".weight";
      t.dims = {a.proj, 1, a.experts};
      t.type = ns::gguf::GgmlType::I8;
      t.offset = at;
      t.nbytes = a.proj * a.experts;
      at += (t.nbytes + 31) / 32 * 32;
      tensors.push_back(t);
    }
  if (at > r->file_size(0))
    throw ns::Error(ns::ErrorKind::invalid_input,
                    "the layout needs " + format_size(at) + " but the file has " + format_size(r->file_size(0)));
  const ExpertLayout layout = ExpertLayout::from_tensors(tensors, a.file);
  ExpertCacheOptions co;
  co.capacity = static_cast<uint32_t>(std::max<uint64_t>(2, a.capacity / layout.slot_bytes()));
  co.policy = a.policy;
  ExpertCache cache(*r, layout, co);

  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> chosen;
  std::vector<uint8_t> mark(a.experts);
  uint64_t checksum = 0;
  const ReaderStats s0 = r->stats();
  const auto t0 = Clock::now();
  for (uint32_t token = 0; token < a.tokens; ++token) {
    for (uint32_t l = 0; l < a.layers; ++l) {
      std::fill(mark.begin(), mark.end(), 0);
      // mark bit 0: some token of the batch chose e; bit 1: the current token did.
      for (uint32_t b = 0; b < a.batch; ++b) {
        for (uint32_t k = 0; k < a.used;) {
          const uint32_t e = static_cast<uint32_t>(rng() % a.experts);
          if (mark[e] & 2) continue;
          mark[e] |= 3;
          ++k;
        }
        for (uint8_t& m : mark) m &= 1;
      }
      chosen.clear();
      for (uint32_t e = 0; e < a.experts; ++e)
        if (mark[e]) chosen.push_back(static_cast<int32_t>(e));
      cache.acquire(l, chosen);
      for (size_t n = 0; n < chosen.size(); ++n) {
        ExpertWeights w;
        const size_t i = cache.wait_next(&w);
        checksum += w.gate()[0] + w.down()[a.proj - 1];
        if (a.compute_ms > 0) spin_for(a.compute_ms);
        cache.release(i);
      }
    }
  }
  const double secs = seconds_since(t0);
  const ReaderStats s1 = r->stats();
  const CacheStats& cs = cache.stats();
  const double busy = (s1.busy_ns - s0.busy_ns) * 1e-9;
  char extra[384];
  std::snprintf(extra, sizeof extra,
                " policy=%s capacity=%u of=%llu hit_rate=%.4f busy_gib_s=%.4f busy_fraction=%.3f io_wait_s=%.3f "
                "tok_s=%.3f checksum=%llu",
                cache_policy_name(a.policy), cache.capacity(), static_cast<unsigned long long>(layout.total_experts()),
                cs.hit_rate(), (s1.bytes_read - s0.bytes_read) / busy / double(1ull << 30), busy / secs,
                cs.io_wait_ns * 1e-9, a.tokens / secs, static_cast<unsigned long long>(checksum));
  Args shown = a;
  shown.mode = r->mode();
  shown.outstanding = 0;
  print_result("cache", shown, cs.bytes_requested, secs, extra);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ns::bench::guarded_main("ns_bench_stream", [&] {
    Args a;
    ns::bench::parse_command_line(argc, argv, "usage: ns_bench_stream read|mmap|cache FILE [options]", a.cmd, a.file,
                                  [&](const std::string& k, const std::string& v) {
      if (k == "--mode")
        a.mode = parse_io_mode(v);
      else if (k == "--qd")
        a.qd = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--outstanding")
        a.outstanding = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--chunk")
        a.chunk = parse_size(v);
      else if (k == "--min")
        a.min = parse_size(v);
      else if (k == "--max")
        a.max = parse_size(v);
      else if (k == "--bytes")
        a.bytes = parse_size(v);
      else if (k == "--seed")
        a.seed = std::stoull(v);
      else if (k == "--compute-ms")
        a.compute_ms = std::stod(v);
      else if (k == "--io-nice")
        a.io_nice = std::stoi(v);
      else if (k == "--layers")
        a.layers = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--experts")
        a.experts = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--used")
        a.used = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--batch")
        a.batch = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--tokens")
        a.tokens = static_cast<uint32_t>(std::stoul(v));
      else if (k == "--proj")
        a.proj = parse_size(v);
      else if (k == "--capacity")
        a.capacity = parse_size(v);
      else if (k == "--policy")
        a.policy = parse_cache_policy(v);
      else
        return false;
      return true;
    });
    return ns::bench::run_named<Args>(a.cmd, {{"read", cmd_read}, {"mmap", cmd_mmap}, {"cache", cmd_cache}}, a);
  });
}
