#include "engine/model/weight_streaming.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "common/human_size.h"
#include "engine/kernels/kernels.h"
#include "common/error.h"

namespace ns {
namespace {

uint64_t proc_kib(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  const size_t klen = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, klen, key) == 0) return std::stoull(line.substr(klen)) * 1024;
  return 0;
}

template <typename T>
uint64_t bytes_of(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

}  // namespace

uint64_t current_rss_bytes() { return proc_kib("/proc/self/status", "VmRSS:"); }

uint64_t forward_state_bytes(const ForwardState& s) {
  uint64_t bytes = 0;
  s.for_each_buffer(BufferShape{}, [&](const auto& buffer, int64_t) { bytes += bytes_of(buffer); });
  return bytes;
}

stream::StreamStats WeightStreaming::stats() const {
  if (!reader) return {};
  return stream::snapshot(*reader, cache.get());
}

std::unique_ptr<WeightStreaming> setup_streaming(const gguf::GgufSet& f, std::span<const gguf::TensorInfo> routed,
                                                 const EngineOptions& opts, bool plan_only, const ModelTuning& tuning,
                                                 const std::optional<stream::BudgetPlan>& plan) {
  const stream::CachePolicy policy =
      opts.cache_policy == CachePolicy::lru ? stream::CachePolicy::lru : stream::CachePolicy::lfu;
  auto ws = std::make_unique<WeightStreaming>();
  ws->layout = stream::ExpertLayout::from_tensors(routed, f.path());
  if (opts.io_mode == IoMode::mmap) {
    spdlog::info("{}: io_mode mmap: weights are read through the page cache; memory_budget is not enforced", f.path());
    return ws;
  }

  if (!plan) throw Error(ErrorKind::internal, f.path() + ": io_mode " + opts.io_mode.name() + " without a memory plan");
  ws->plan = *plan;
  ws->planned = true;
  spdlog::info("memory plan for {}:\n{}", f.path(), ws->plan.describe());
  if (ws->layout.n_moe_layers() == 0 || plan_only) return ws;

  // Faults on resident tensors must not read ahead into the expert stacks.
  if (!f.advise_random())
    spdlog::warn("{}: madvise(MADV_RANDOM) refused ({}): page-fault read-ahead may pull expert weights into memory",
                 f.path(), std::strerror(errno));
  stream::ReaderOptions ro;
  ro.mode = opts.io_mode == IoMode::pread ? stream::IoMode::pread : stream::IoMode::uring;
  const size_t devices = std::max<size_t>(f.n_devices(), 1);
  const auto depth = static_cast<uint32_t>(std::max(1, opts.io_queue_depth));
  ro.queue_depth = depth * static_cast<uint32_t>(std::min<size_t>(devices, 64));
  if (devices > 1)
    spdlog::info("{}: the model's {} shards lie on {} devices: {} reads in flight ({} a device)", f.path(),
                 f.n_shards(), devices, ro.queue_depth, depth);
  ws->reader = stream::make_reader(f.paths(), ro);
  stream::ExpertCacheOptions co;
  co.capacity = ws->plan.cache_experts;
  if (tuning.max_cache_experts > 0) co.capacity = std::min(co.capacity, tuning.max_cache_experts);
  co.policy = policy;
  // 2 MiB pages: fewer TLB misses streaming the slots (one decoded sequence
  // on the in-RAM ds2lite model, 4 interleaved pairs: 13.17 against 12.81
  // tok/s; 6 MoE layers of 6 experts from 1.5 GiB, 2 threads: +10 %;
  // docs/performance.md "Threads: the spin that holds").
  co.pool.huge_pages = true;
  if (opts.repack_experts) co.land = kernels::repack_rows;  // Q4_0 experts into Q4_0_R16 as they land (kernels.h)
  ws->cache = std::make_unique<stream::ExpertCache>(*ws->reader, ws->layout, co);
  spdlog::info("streaming experts with {} ({} reads in flight), cache {} experts ({}), policy {}",
               stream::io_mode_name(ws->reader->mode()), ro.queue_depth, co.capacity,
               format_size(uint64_t{co.capacity} * ws->layout.slot_bytes()), stream::cache_policy_name(policy));
  if (opts.preload_experts) {
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t n = ws->cache->preload();
    if (n > 0)
      spdlog::info("the cache holds every expert: read all {} ({}) at load in {:.1f} s", n,
                   format_size(uint64_t{n} * ws->layout.slot_bytes()),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return ws;
}

void attach_streaming(WeightStreaming& ws, std::span<const kernels::MatrixView> routers, const ModelTuning& tuning,
                      ForwardState& s) {
  s.experts = ws.cache.get();
  s.predict_next = ws.cache && tuning.predict_experts;
  s.predict_width = tuning.prefetch_per_token;
  s.routers.clear();
  if (!s.predict_next) return;
  // Routers are resident: reading them through the mapping is within the plan.
  s.routers.resize(routers.size());
  for (uint32_t l = 0; l < routers.size(); ++l)
    if (ws.layout.is_moe_layer(l)) s.routers[l] = routers[l];
}

}  // namespace ns
