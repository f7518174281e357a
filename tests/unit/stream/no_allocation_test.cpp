// The token loop must not allocate: counts global operator new calls while
// the reader and the expert cache serve layers (acquire, wait_next, release,
// prefetch, raw submit and wait_any). The counter is
// tests/unit/allocation_counter.h.
#include <doctest/doctest.h>

#include <vector>

#include "engine/stream/expert_cache.h"
#include "engine/stream/stream_stats.h"
#include "tests/unit/allocation_counter.h"
#include "tests/unit/stream/stream_test_util.h"

using namespace ns::stream;

TEST_CASE("serving layers from the expert cache does not allocate") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("moe.gguf");
  stream_test::TinyMoe shape;
  shape.n_layer = 5;
  stream_test::write_tiny_moe(path, shape);
  auto file = ns::gguf::GgufFile::open(path);
  const ExpertLayout layout = ExpertLayout::from_tensors(stream_test::stacks_of(file->tensors()), path);

  stream_test::for_each_mode_and_policy([&](IoMode mode, CachePolicy policy) {
    ReaderOptions ro;
    ro.mode = mode;
    ro.queue_depth = 4;
    ro.max_chunk_bytes = 4096;  // several chunks per read: the requeue path runs too
    auto reader = make_reader({path}, ro);
    ExpertCacheOptions co;
    co.capacity = 6;  // fewer than a layer's 8 experts: deferral runs too
    co.policy = policy;
    ExpertCache cache(*reader, layout, co);

    // Routing traces prepared up front (a vector is an allocation).
    const std::vector<std::vector<int32_t>> routes = {{0, 3, 5}, {1, 2, 3, 4, 5, 6, 7, 0}, {7}, {2, 6}, {4, 1, 0}};
    const std::vector<int32_t> predicted = {5, 6};
    std::vector<uint8_t> sink(64, 0);
    stream_test::AlignedBuffer raw = stream_test::aligned_buffer(1 << 16);
    ReadOp op;
    ReadOp* ops[1] = {&op};

    const long before = ns_test::allocations();
    for (int token = 0; token < 6; ++token) {
      for (uint32_t l = 1; l < shape.n_layer; ++l) {
        const std::vector<int32_t>& experts = routes[(token + l) % routes.size()];
        cache.acquire(l, experts);
        if (l + 1 < shape.n_layer) cache.prefetch(l + 1, predicted);
        for (size_t n = 0; n < experts.size(); ++n) {
          ExpertWeights w;
          const size_t i = cache.wait_next(&w);
          sink[i] ^= w.gate()[0] ^ w.up()[1] ^ w.down()[2];
          cache.release(i);
        }
      }
      op.prepare(0, 1000 + static_cast<uint64_t>(token) * 333, 20000, raw.get(), 1 << 16);
      reader->submit(op);
      reader->wait_any(ops);
      reader->wait(op);
    }
    cache.wait_idle();
    const StreamStats s = snapshot(*reader, &cache);
    const long during = ns_test::allocations() - before;
    CHECK(during == 0);
    CHECK(s.cache.misses > 0);
    CHECK(s.cache.hits > 0);
    CHECK(s.cache.evictions > 0);
    CHECK(s.cache.prefetch_reads > 0);
    CHECK(s.reader.chunks > s.reader.reads);
    CHECK(sink.size() == 64);
  });
}
