// The expert cache over a real GGUF file: the bytes it returns are the
// expert's bytes in the file; hits, misses, evictions, deferral, prefetch
// accounting and read errors behave as documented.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/stream/expert_cache.h"
#include "tests/unit/stream/stream_test_util.h"

using namespace ns::stream;

namespace {

struct Fixture {
  stream_test::ScratchDir dir;
  std::string path = dir.file("tiny-moe.gguf");
  std::shared_ptr<ns::gguf::GgufFile> file;
  ExpertLayout layout;
  explicit Fixture(const stream_test::TinyMoe& m = {}) {
    stream_test::write_tiny_moe(path, m);
    file = ns::gguf::GgufFile::open(path);
    layout = ExpertLayout::from_tensors(stream_test::stacks_of(file->tensors()), path);
  }
  std::unique_ptr<Reader> reader(IoMode mode = IoMode::uring) {
    ReaderOptions o{.mode = mode, .queue_depth = 8};
    return make_reader({path}, o);
  }
  // The expert's projection bytes as the mapped file has them.
  const uint8_t* expected(uint32_t layer, int32_t e, int p) const {
    const std::string name =
        "blk." + std::to_string(layer) + ".ffn_" + projection_name(static_cast<Projection>(p)) + "_exps.weight";
    const ns::gguf::TensorInfo* t = file->find_tensor(name);
    return file->tensor_data(*t) + static_cast<uint64_t>(e) * (t->nbytes / t->dims[2]);
  }
  void check_bytes(const ExpertWeights& w, uint32_t layer, int32_t e) const {
    for (int p = 0; p < kProjections; ++p) {
      CAPTURE(layer);
      CAPTURE(e);
      CAPTURE(p);
      const uint64_t n = layout.layer(layer).proj[static_cast<size_t>(p)].expert_bytes;
      CHECK(std::memcmp(w.proj[static_cast<size_t>(p)], expected(layer, e, p), n) == 0);
    }
  }
};

ExpertCacheOptions options(uint32_t capacity, CachePolicy policy = CachePolicy::lru) {
  return {.capacity = capacity, .policy = policy, .pool = {.prefault = false}};
}

// One layer, expert-major as moe_ffn runs it: wait_next, check, release.
void run_layer(ExpertCache& c, const Fixture& f, uint32_t layer, const std::vector<int32_t>& experts) {
  c.acquire(layer, experts);
  std::vector<bool> seen(experts.size(), false);
  for (size_t n = 0; n < experts.size(); ++n) {
    ExpertWeights w;
    const size_t i = c.wait_next(&w);
    REQUIRE(i < experts.size());
    CHECK(!seen[i]);
    seen[i] = true;
    f.check_bytes(w, layer, experts[i]);
    c.release(i);
  }
}

}  // namespace

TEST_CASE("the layout finds the stacks, and a slot holds any expert with O_DIRECT slack") {
  Fixture f;
  CHECK(f.layout.n_layers() == 3);
  CHECK(f.layout.n_moe_layers() == 2);
  CHECK(!f.layout.is_moe_layer(0));
  CHECK(f.layout.is_moe_layer(1));
  CHECK(f.layout.n_experts() == 8);
  CHECK(f.layout.total_experts() == 16);
  const LayerExperts& le = f.layout.layer(1);
  CHECK(le.proj[0].expert_bytes == 50 * 102);  // 50 rows of 96 Q8_0 values
  CHECK(le.proj[2].expert_bytes == 96 * 68);   // 96 rows of 64
  CHECK(le.proj[0].offset % 4096 != 0);        // odd placement: the aligned-superset path is exercised
  CHECK(!le.contiguous(0));
  CHECK(f.layout.slot_bytes() == direct_read_capacity(5100) * 2 + direct_read_capacity(6528));
  CHECK(f.layout.total_bytes() == 16 * le.expert_bytes());
}

TEST_CASE("every expert of every layer comes back byte-exact, in both reader modes and both policies") {
  Fixture f;
  stream_test::for_each_mode_and_policy([&](IoMode mode, CachePolicy policy) {
    auto r = f.reader(mode);
    ExpertCache c(*r, f.layout, options(5, policy));
    run_layer(c, f, 1, {0, 1, 2, 3, 4, 5, 6, 7});
    run_layer(c, f, 2, {7, 6, 5, 4, 3, 2, 1, 0});
    run_layer(c, f, 1, {3, 5});
    const CacheStats& s = c.stats();
    CHECK(s.hits + s.misses == 18);
    CHECK(s.misses >= 16);
    CHECK(r->stats().failed == 0);
  });
}

TEST_CASE("hits, misses and evictions follow lru on a known sequence") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(3));
  run_layer(c, f, 1, {0, 1});  // 2 misses
  CHECK(c.stats().misses == 2);
  run_layer(c, f, 1, {1, 2});  // 1 hit, 1 miss: full (0, 1, 2)
  CHECK(c.stats().hits == 1);
  CHECK(c.stats().evictions == 0);
  run_layer(c, f, 2, {5});  // evicts (1, 0), the least recent
  CHECK(c.stats().evictions == 1);
  CHECK(!c.resident(1, 0));
  CHECK(c.resident(1, 1));
  CHECK(c.resident(1, 2));
  CHECK(c.resident(2, 5));
  run_layer(c, f, 1, {2, 1, 0});  // 2 hits, then 0 evicts (2, 5)
  CHECK(c.stats().hits == 3);
  CHECK(c.stats().misses == 5);
  CHECK(c.stats().evictions == 2);
  CHECK(!c.resident(2, 5));
  CHECK(c.stats().hit_rate() == doctest::Approx(3.0 / 8.0));
}

TEST_CASE("a layer's hits are pinned before its misses look for room") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(2));
  run_layer(c, f, 1, {0, 1});
  // 0 is the least recent, but it is wanted again: the miss (3) must evict 1.
  c.acquire(1, std::vector<int32_t>{3, 0});
  CHECK(c.stats().hits == 1);
  CHECK(c.resident(1, 0));
  CHECK(!c.resident(1, 1));
  f.check_bytes(c.wait(1), 1, 0);
  f.check_bytes(c.wait(0), 1, 3);
  c.release_all();
}

TEST_CASE("more experts than slots: misses wait for released slots and still arrive in full") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(2));
  run_layer(c, f, 2, {0, 1, 2, 3, 4, 5, 6});
  CHECK(c.stats().misses == 7);
  CHECK(c.stats().evictions == 5);

  // Waiting on a deferred expert while both slots are held cannot make progress: a loud error.
  c.acquire(1, std::vector<int32_t>{0, 1, 2});
  c.wait(0);
  c.wait(1);
  CHECK_THROWS_AS(c.wait(2), ns::Error);
  c.release(0);
  f.check_bytes(c.wait(2), 1, 2);
  c.release_all();
}

TEST_CASE("try_next hands out only experts in memory and never waits") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(2));
  run_layer(c, f, 1, {0, 1});  // both resident
  // 0 and 1 are hits; 2 has no slot while they are held: deferred.
  c.acquire(1, std::vector<int32_t>{2, 0, 1});
  std::vector<bool> seen(3, false);
  for (int k = 0; k < 2; ++k) {
    ExpertWeights w;
    const std::optional<size_t> i = c.try_next(&w);
    REQUIRE(i.has_value());
    REQUIRE(*i >= 1);
    CHECK(!seen[*i]);
    seen[*i] = true;
    f.check_bytes(w, 1, *i == 1 ? 0 : 1);
  }
  ExpertWeights w;
  CHECK(!c.try_next(&w).has_value());  // only the deferred one is left: no waiting
  c.release(1);                        // frees a slot: 2's read starts
  f.check_bytes(c.wait(0), 1, 2);
  CHECK(!c.try_next(&w).has_value());  // every expert handed out
  c.release_all();
}

TEST_CASE("prefetch reads ahead; used and wasted prefetches are counted") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(4));
  c.prefetch(2, std::vector<int32_t>{3, 4});
  c.wait_idle();  // landed, so eviction order below does not depend on disk timing
  CHECK(c.stats().prefetch_reads == 2);
  CHECK(c.resident(2, 3));
  run_layer(c, f, 2, {3, 5});  // 3 was prefetched: a hit, the prefetch used
  CHECK(c.stats().hits == 1);
  CHECK(c.stats().prefetch_used == 1);
  c.prefetch(2, std::vector<int32_t>{3});  // already there
  CHECK(c.stats().prefetch_cached == 1);
  run_layer(c, f, 1, {0, 1, 2});  // fills the cache: (2, 4) is the oldest and goes, unused
  CHECK(c.stats().prefetch_wasted == 1);
  CHECK(!c.resident(2, 4));
  CHECK(c.stats().prefetch_accuracy() == doctest::Approx(0.5));

  // While a demand read waits for room, prefetch stays out of the way.
  ExpertCacheOptions od = options(2);
  od.register_buffers = false;  // c keeps the reader's registration
  ExpertCache d(*r, f.layout, od);
  d.acquire(1, std::vector<int32_t>{0, 1, 2});
  d.prefetch(2, std::vector<int32_t>{0});
  CHECK(d.stats().prefetch_reads == 0);
  CHECK(d.stats().prefetch_skipped == 1);
  d.release_all();
}

TEST_CASE("a read error reaches the caller as an io error naming the layer, expert and file") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(3));
  // Cut the file inside layer 2's stacks after the reader has opened it.
  const uint64_t cut = f.layout.layer(2).proj[0].offset_of(4);
  REQUIRE(::truncate(f.path.c_str(), static_cast<off_t>(cut)) == 0);
  run_layer(c, f, 1, {0});  // layer 1 lies before the cut
  c.acquire(2, std::vector<int32_t>{6});
  try {
    c.wait(0);
    FAIL("reading a truncated expert succeeded");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::io);
    const std::string msg = e.what();
    CHECK(msg.find("layer 2 expert 6") != std::string::npos);
    CHECK(msg.find(f.path) != std::string::npos);
  }
  c.release_all();
  // The cache is still usable, and the failed expert fails again rather than returning stale bytes.
  run_layer(c, f, 1, {1});
  c.acquire(2, std::vector<int32_t>{6});
  CHECK_THROWS_AS(c.wait(0), ns::Error);
}

TEST_CASE("misuse is refused") {
  Fixture f;
  auto r = f.reader();
  ExpertCache c(*r, f.layout, options(2));
  CHECK_THROWS_AS(c.acquire(0, std::vector<int32_t>{0}), ns::Error);     // a dense layer
  CHECK_THROWS_AS(c.acquire(1, std::vector<int32_t>{8}), ns::Error);     // no expert 8
  CHECK_THROWS_AS(c.acquire(1, std::vector<int32_t>{2, 2}), ns::Error);  // twice
  c.acquire(1, std::vector<int32_t>{1});
  CHECK_THROWS_AS(c.wait(1), ns::Error);
  c.release(0);
  CHECK_THROWS_AS(c.release(0), ns::Error);
  CHECK_THROWS_AS(ExpertCache(*r, f.layout, options(0)), ns::Error);
}

namespace {
int g_landed = 0;  // projections the land hook below rewrote
void flip_bytes(ns::gguf::GgmlType type, void* data, int64_t rows, int64_t cols) {
  auto* p = static_cast<uint8_t*>(data);
  const uint64_t n =
      ns::gguf::row_bytes(ns::gguf::traits(type), static_cast<uint64_t>(cols)) * static_cast<uint64_t>(rows);
  for (uint64_t i = 0; i < n; ++i) p[i] ^= 0xff;
  ++g_landed;
}
}  // namespace

TEST_CASE("the land hook rewrites each projection once, as the expert lands, before anyone gets it") {
  Fixture f;
  auto r = f.reader();
  ExpertCacheOptions o = options(4);
  o.land = flip_bytes;
  ExpertCache c(*r, f.layout, o);
  g_landed = 0;
  for (int round = 0; round < 2; ++round) {  // the second round hits: nothing lands again
    c.acquire(1, std::vector<int32_t>{0, 5, 6});
    for (size_t n = 0; n < 3; ++n) {
      ExpertWeights w;
      const size_t i = c.wait_next(&w);
      CHECK(w.landed);
      const int32_t e = std::array<int32_t, 3>{0, 5, 6}[i];
      for (int p = 0; p < kProjections; ++p) {
        const uint64_t bytes = f.layout.layer(1).proj[static_cast<size_t>(p)].expert_bytes;
        const uint8_t* got = w.proj[static_cast<size_t>(p)];
        const uint8_t* want = f.expected(1, e, p);
        uint64_t wrong = 0;
        for (uint64_t k = 0; k < bytes; ++k) wrong += got[k] != static_cast<uint8_t>(want[k] ^ 0xff);
        CHECK(wrong == 0);
      }
      c.release(i);
    }
    CHECK(g_landed == 3 * kProjections);
  }
  CHECK(c.stats().hits == 3);
}
