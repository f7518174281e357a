// The expert cache: routed experts' weights, read on demand into a fixed
// pool of slots (one expert's gate, up and down per slot), kept by a
// replacement policy, keyed by (layer, expert).
//
// Use, for one MoE layer over a batch (expert-major):
//   cache.acquire(layer, experts);          // the experts the batch routed to
//   for (size_t n = 0; n < experts.size(); ++n) {
//     ExpertWeights w;
//     size_t i = cache.wait_next(&w);       // a ready one: hits first, then as reads land
//     ... gather, gate/up/down matmuls on w, scatter for experts[i] ...
//     cache.release(i);                     // its slot may now take a deferred read
//   }
//   cache.prefetch(layer + 1, predicted);   // optional, while this layer computes
//
// Contract:
// - acquire() pins the hits first (so this layer's misses never evict them),
//   then issues reads for the misses into free or evicted slots. Misses that
//   find no unpinned slot are deferred and read as release() frees slots; the
//   capacity must therefore be at least 1 (2 to overlap reading and compute).
//   acquire() releases whatever the previous acquire still held.
// - prefetch() reads predicted experts into unpinned slots, only when no
//   demand read is waiting for room; whether each prefetch was later used or
//   evicted unused is counted.
// - A failed read throws ns::Error(io) from wait()/wait_next(), naming the
//   layer, expert, projection, file and offset; the slot is retried on the
//   next acquire of that expert. A failed prefetch is dropped silently (the
//   demand read reports it).
// - No allocation after construction. The destructor waits for reads in
//   flight; the reader must outlive the cache. Not thread-safe: one compute
//   thread drives it; the reads run on the reader's I/O side.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/stream/buffer_pool.h"
#include "engine/stream/cache_index.h"
#include "engine/stream/expert_layout.h"
#include "engine/stream/reader.h"

namespace ns::stream {

struct ExpertCacheOptions {
  uint32_t capacity = 0;  // slots = experts held at once (BudgetPlan::cache_experts)
  CachePolicy policy = CachePolicy::lfu;
  uint64_t aging_period = 0;  // lfu: 0 = CacheIndex's default
  BufferPoolOptions pool;
  // Register the slots with the reader (io_uring fixed buffers). A reader holds
  // one registration: the last cache (or other owner) to register wins.
  bool register_buffers = true;
  // Called on each projection of an expert as it lands (its reads done, on
  // the thread that drives the cache, before anyone gets it): rewrites the
  // rows in place into the layout the kernels run fastest on (the model
  // passes kernels::repack_rows; stream sits below kernels). Null: the slots
  // keep the file's bytes. Its time is CacheStats::land_ns, part of the step.
  using LandFn = void (*)(gguf::GgmlType type, void* rows_data, int64_t rows, int64_t cols);
  LandFn land = nullptr;
};

// Where one expert's matrices are: proj[p] is Projection p's rows, laid out
// exactly as in the file (use with the layout's type, rows and cols).
struct ExpertWeights {
  std::array<const uint8_t*, kProjections> proj{};
  bool landed = false;  // ExpertCacheOptions::land rewrote them (the layout's type is then the land's)
  const uint8_t* gate() const { return proj[0]; }
  const uint8_t* up() const { return proj[1]; }
  const uint8_t* down() const { return proj[2]; }
};

struct CacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0;
  uint64_t late_hits = 0;           // hits on an expert still being read (a prefetch in flight)
  uint64_t bytes_requested = 0;     // expert bytes asked of the reader (without alignment slack)
  uint64_t prefetch_requested = 0;  // experts named by prefetch()
  uint64_t prefetch_cached = 0;     // ... already resident
  uint64_t prefetch_reads = 0;      // ... read
  uint64_t prefetch_used = 0;       // read by prefetch, then acquired
  uint64_t prefetch_wasted = 0;     // read by prefetch, evicted unused
  uint64_t prefetch_skipped = 0;    // no room (demand reads waiting, or all slots pinned)
  uint64_t io_wait_ns = 0;          // time the caller blocked in wait()/wait_next()
  uint64_t land_ns = 0;             // time in ExpertCacheOptions::land (repacking landed experts)
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
  // Share of prefetch reads that were used; reads not yet resolved count as unused.
  double prefetch_accuracy() const { return prefetch_reads ? double(prefetch_used) / double(prefetch_reads) : 0.0; }
};

class ExpertCache {
 public:
  ExpertCache(Reader& reader, const ExpertLayout& layout, const ExpertCacheOptions& opts);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Starts a layer: `experts` are distinct expert ids of `layer` (an MoE layer).
  // Misuse (duplicate or out-of-range ids) throws Error(internal).
  void acquire(uint32_t layer, std::span<const int32_t> experts);
  // Blocks until experts[i] of the current acquire is in memory.
  ExpertWeights wait(size_t i);
  // Blocks until some not yet handed out expert of the current acquire is in
  // memory, preferring those already there; returns its index i (into experts).
  size_t wait_next(ExpertWeights* weights);
  // wait_next without blocking: an expert already in memory, or nullopt.
  std::optional<size_t> try_next(ExpertWeights* weights);
  // Done with experts[i]: unpin it, and start deferred reads in freed slots.
  void release(size_t i);
  // Releases everything the current acquire still holds.
  void release_all();
  // Reads experts of a later layer ahead of need (see the contract).
  void prefetch(uint32_t layer, std::span<const int32_t> experts);
  // Blocks until no read is in flight (prefetches included): end of a job,
  // deterministic stats.
  void wait_idle();
  // When the capacity holds every routed expert of the model: reads them all,
  // layer by layer in file order, and returns once they are in memory (landed:
  // repacked where the cache repacks), so no step waits for a first-use read;
  // the count read. Otherwise reads nothing and returns 0. Counted in the
  // bytes read, not as lookups or prefetches. A failed read leaves its slot
  // failed: the first acquire of that expert reads it again and reports the
  // error. Call before the first acquire.
  uint32_t preload();

  // Whether (layer, expert) is in the cache (loaded or being read).
  bool resident(uint32_t layer, int32_t expert) const;
  // Whether every routed expert of the model is (a budget that holds the
  // whole model, after warm-up): a prefetch has nothing left to read, so the
  // caller can skip predicting one (moe_ffn's next-layer router).
  bool holds_every_expert() const { return index_.n_resident() >= moe_experts_; }
  uint32_t capacity() const { return index_.capacity(); }
  const ExpertLayout& layout() const { return layout_; }
  const BufferPool& pool() const { return pool_; }
  CachePolicy policy() const { return index_.policy(); }
  const CacheStats& stats() const { return stats_; }

 private:
  struct Slot {
    enum class State : uint8_t { empty, loading, ready, failed };
    State state = State::empty;
    bool prefetched = false;  // filled by prefetch() and not used since
    uint8_t n_ops = 0;
    uint32_t layer = 0;
    int32_t expert = -1;
    std::array<ReadOp, kProjections> ops;
  };
  struct Want {
    int32_t expert = -1;
    int32_t slot = CacheIndex::kNone;  // kNone: deferred, waiting for room
    bool handed = false;               // returned by wait()/wait_next()
    bool released = false;
  };

  uint32_t key(uint32_t layer, int32_t expert) const {
    return layer * layout_.n_experts() + static_cast<uint32_t>(expert);
  }
  // Claims a slot for (layer, expert) and starts its reads; kNone if no room.
  int32_t start_read(uint32_t layer, int32_t expert, bool prefetch);
  void issue_reads(int32_t slot, uint32_t layer, int32_t expert);
  void finish_load(int32_t slot);  // its reads have finished: ready or failed, io pin dropped
  void poll_loading();
  void issue_deferred();
  // Blocks until some slot being read finishes (for a deferred want with no room).
  void wait_for_room();
  ExpertWeights weights_of(size_t i);
  ExpertWeights slot_weights(const Slot& s) const;  // where its projections are

  Reader& reader_;
  ExpertLayout layout_;
  ExpertCacheOptions opts_;
  BufferPool pool_;
  bool registered_ = false;  // the reader took pool_ as fixed buffers
  CacheIndex index_;
  uint32_t moe_experts_ = 0;  // routed experts of every MoE layer together
  std::unique_ptr<Slot[]> slots_;
  std::vector<int32_t> loading_;  // slots with reads in flight (each holds an io pin)
  std::vector<Want> wants_;       // the current acquire (capacity: n_experts)
  size_t n_wants_ = 0;
  size_t first_deferred_ = 0;  // no want before this one lacks a slot
  uint32_t layer_ = 0;
  std::vector<uint32_t> stamp_;  // duplicate check: stamp_[expert] == generation_
  uint32_t generation_ = 0;
  std::vector<ReadOp*> waiting_;  // scratch for wait_next (capacity: 3 × slots)
  CacheStats stats_;
};

}  // namespace ns::stream
