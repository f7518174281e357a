#include "engine/stream/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/error.h"

namespace ns::stream {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

ExpertCache::ExpertCache(Reader& reader, const ExpertLayout& layout, const ExpertCacheOptions& opts)
    : reader_(reader),
      layout_(layout),
      opts_(opts),
      pool_(std::max<uint32_t>(opts.capacity, 1), std::max<uint64_t>(layout.slot_bytes(), 1), opts.pool),
      index_(std::max<uint32_t>(layout.n_layers() * layout.n_experts(), 1), std::max<uint32_t>(opts.capacity, 1),
             opts.policy, opts.aging_period),
      slots_(new Slot[std::max<uint32_t>(opts.capacity, 1)]) {
  if (opts.capacity == 0) throw Error(ErrorKind::internal, "ExpertCache needs a capacity of at least one expert");
  if (layout.n_moe_layers() == 0) throw Error(ErrorKind::internal, "ExpertCache: the model has no routed experts");
  for (uint32_t l = 0; l < layout.n_layers(); ++l) {
    if (!layout.is_moe_layer(l)) continue;
    moe_experts_ += layout.layer(l).n_expert;
    for (const ProjectionLayout& pl : layout.layer(l).proj)
      if (pl.file >= reader.n_files())
        throw Error(ErrorKind::internal, "ExpertCache: layer " + std::to_string(l) + "'s experts are in file " +
                                             std::to_string(pl.file) + " but the reader has " +
                                             std::to_string(reader.n_files()));
  }
  loading_.reserve(opts.capacity);
  wants_.resize(layout.n_experts());
  stamp_.assign(layout.n_experts(), 0);
  waiting_.reserve(static_cast<size_t>(opts.capacity) * kProjections);
  if (opts.register_buffers) registered_ = reader_.register_buffers(pool_.iovecs());
}

ExpertCache::~ExpertCache() {
  // Reads land in the pool: none may outlive it.
  for (int32_t s : loading_)
    for (uint8_t k = 0; k < slots_[static_cast<size_t>(s)].n_ops; ++k)
      reader_.wait_finished(slots_[static_cast<size_t>(s)].ops[k]);
}

bool ExpertCache::resident(uint32_t layer, int32_t expert) const {
  if (!layout_.is_moe_layer(layer) || expert < 0 || static_cast<uint32_t>(expert) >= layout_.layer(layer).n_expert)
    return false;
  const int32_t s = index_.find(key(layer, expert));
  return s != CacheIndex::kNone && slots_[static_cast<size_t>(s)].state != Slot::State::failed;
}

void ExpertCache::issue_reads(int32_t slot, uint32_t layer, int32_t expert) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  const LayerExperts& le = layout_.layer(layer);
  const auto e = static_cast<uint32_t>(expert);
  uint8_t* mem = pool_.slot(static_cast<uint32_t>(slot));
  const int32_t buf = registered_ ? pool_.buffer_index(static_cast<uint32_t>(slot)) : -1;
  if (le.contiguous(e)) {
    s.ops[0].prepare(le.proj[0].file, le.proj[0].offset_of(e), le.expert_bytes(), mem, pool_.slot_bytes(), buf);
    s.n_ops = 1;
  } else {
    for (int p = 0; p < kProjections; ++p) {
      const auto proj = static_cast<Projection>(p);
      const ProjectionLayout& pl = le.proj[static_cast<size_t>(p)];
      s.ops[static_cast<size_t>(p)].prepare(pl.file, pl.offset_of(e), pl.expert_bytes, mem + layout_.slot_offset(proj),
                                            layout_.slot_capacity(proj), buf);
    }
    s.n_ops = kProjections;
  }
  s.state = Slot::State::loading;
  s.layer = layer;
  s.expert = expert;
  index_.pin(slot);  // the io pin: a slot being written is never evicted
  loading_.push_back(slot);
  stats_.bytes_requested += le.expert_bytes();
  std::array<ReadOp*, kProjections> ops{&s.ops[0], &s.ops[1], &s.ops[2]};
  reader_.submit(std::span<ReadOp* const>(ops.data(), s.n_ops));
}

int32_t ExpertCache::start_read(uint32_t layer, int32_t expert, bool prefetch) {
  int32_t evicted = CacheIndex::kNone;
  const int32_t slot = index_.insert(key(layer, expert), !prefetch, &evicted);
  if (slot == CacheIndex::kNone) return slot;
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (evicted != CacheIndex::kNone) {
    ++stats_.evictions;
    if (s.prefetched) ++stats_.prefetch_wasted;
  }
  s.prefetched = prefetch;
  issue_reads(slot, layer, expert);
  return slot;
}

void ExpertCache::finish_load(int32_t slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  bool ok = true;
  for (uint8_t k = 0; k < s.n_ops; ++k) ok &= s.ops[k].ok();
  s.state = ok ? Slot::State::ready : Slot::State::failed;
  if (ok && opts_.land != nullptr) {
    const uint64_t t0 = now_ns();
    const LayerExperts& le = layout_.layer(s.layer);
    const ExpertWeights w = slot_weights(s);
    for (size_t p = 0; p < kProjections; ++p) {
      const ProjectionLayout& pl = le.proj[p];
      // The slot is the pool's memory, written by the reader and now ours.
      opts_.land(pl.type, const_cast<uint8_t*>(w.proj[p]), static_cast<int64_t>(pl.rows),
                 static_cast<int64_t>(pl.cols));
    }
    stats_.land_ns += now_ns() - t0;
  }
  index_.unpin(slot);
  const auto it = std::find(loading_.begin(), loading_.end(), slot);
  *it = loading_.back();
  loading_.pop_back();
  // A failed prefetch nobody holds: forget it, the demand read will report the error.
  if (!ok && s.prefetched && index_.pins(slot) == 0) {
    s.prefetched = false;
    s.state = Slot::State::empty;
    index_.erase(slot);
  }
}

void ExpertCache::poll_loading() {
  for (size_t j = loading_.size(); j-- > 0;) {
    const int32_t slot = loading_[j];
    const Slot& s = slots_[static_cast<size_t>(slot)];
    bool done = true;
    for (uint8_t k = 0; k < s.n_ops; ++k) done &= s.ops[k].finished();
    if (done) finish_load(slot);
  }
}

void ExpertCache::release_all() {
  for (size_t i = 0; i < n_wants_; ++i) {
    Want& w = wants_[i];
    if (!w.released && w.slot != CacheIndex::kNone) index_.unpin(w.slot);
    w.released = true;
  }
  n_wants_ = 0;
  first_deferred_ = 0;
}

void ExpertCache::acquire(uint32_t layer, std::span<const int32_t> experts) {
  release_all();
  poll_loading();
  if (!layout_.is_moe_layer(layer))
    throw Error(ErrorKind::internal, "ExpertCache::acquire: layer " + std::to_string(layer) + " has no routed experts");
  const uint32_t n_expert = layout_.layer(layer).n_expert;
  if (experts.size() > n_expert)
    throw Error(ErrorKind::internal, "ExpertCache::acquire: more experts than layer " + std::to_string(layer) + " has");
  if (++generation_ == 0) {  // wrapped: old stamps could collide
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  for (int32_t e : experts) {
    if (e < 0 || static_cast<uint32_t>(e) >= n_expert || stamp_[static_cast<size_t>(e)] == generation_)
      throw Error(ErrorKind::internal, "ExpertCache::acquire: expert " + std::to_string(e) + " of layer " +
                                           std::to_string(layer) + " is out of range or listed twice");
    stamp_[static_cast<size_t>(e)] = generation_;
  }

  layer_ = layer;
  n_wants_ = experts.size();
  // Hits first, pinned before any miss can evict them.
  for (size_t i = 0; i < n_wants_; ++i) {
    Want& w = wants_[i];
    w = Want{experts[i], index_.find(key(layer, experts[i])), false, false};
    if (w.slot == CacheIndex::kNone) {
      ++stats_.misses;
      continue;
    }
    Slot& s = slots_[static_cast<size_t>(w.slot)];
    index_.touch(w.slot);
    index_.pin(w.slot);
    if (s.state == Slot::State::failed) {  // an earlier read failed: try again
      ++stats_.misses;
      s.prefetched = false;
      issue_reads(w.slot, layer, w.expert);
      continue;
    }
    ++stats_.hits;
    if (s.state == Slot::State::loading) ++stats_.late_hits;
    if (s.prefetched) {
      ++stats_.prefetch_used;
      s.prefetched = false;
    }
  }
  first_deferred_ = 0;
  issue_deferred();
}

void ExpertCache::issue_deferred() {
  for (; first_deferred_ < n_wants_; ++first_deferred_) {
    Want& w = wants_[first_deferred_];
    if (w.slot != CacheIndex::kNone || w.released) continue;
    const int32_t slot = start_read(layer_, w.expert, false);
    if (slot == CacheIndex::kNone) return;
    index_.pin(slot);
    w.slot = slot;
  }
}

void ExpertCache::wait_for_room() {
  if (loading_.empty())
    throw Error(ErrorKind::internal,
                "ExpertCache: all " + std::to_string(capacity()) +
                    " slots are pinned; release experts before waiting for more (or raise the capacity)");
  const Slot& s = slots_[static_cast<size_t>(loading_.front())];
  const uint64_t t0 = now_ns();
  for (uint8_t k = 0; k < s.n_ops; ++k) reader_.wait_finished(s.ops[k]);
  stats_.io_wait_ns += now_ns() - t0;
  poll_loading();
}

ExpertWeights ExpertCache::weights_of(size_t i) {
  Want& w = wants_[i];
  Slot& s = slots_[static_cast<size_t>(w.slot)];
  if (s.state == Slot::State::loading) {
    const uint64_t t0 = now_ns();
    for (uint8_t k = 0; k < s.n_ops; ++k) reader_.wait_finished(s.ops[k]);
    stats_.io_wait_ns += now_ns() - t0;
    finish_load(w.slot);
  }
  w.handed = true;
  if (s.state == Slot::State::failed) {
    for (uint8_t k = 0; k < s.n_ops; ++k)
      if (!s.ops[k].ok())
        throw Error(ErrorKind::io, "layer " + std::to_string(layer_) + " expert " + std::to_string(w.expert) + " (" +
                                       (s.n_ops == 1 ? "gate+up+down" : projection_name(static_cast<Projection>(k))) +
                                       "): " + reader_.error_of(s.ops[k]).what());
  }
  return slot_weights(s);
}

ExpertWeights ExpertCache::slot_weights(const Slot& s) const {
  ExpertWeights out;
  if (s.n_ops == 1) {
    const LayerExperts& le = layout_.layer(s.layer);
    out.proj[0] = s.ops[0].data();
    out.proj[1] = out.proj[0] + le.proj[0].expert_bytes;
    out.proj[2] = out.proj[1] + le.proj[1].expert_bytes;
  } else {
    for (size_t p = 0; p < kProjections; ++p) out.proj[p] = s.ops[p].data();
  }
  out.landed = opts_.land != nullptr;
  return out;
}

ExpertWeights ExpertCache::wait(size_t i) {
  if (i >= n_wants_ || wants_[i].released) throw Error(ErrorKind::internal, "ExpertCache::wait: no such expert held");
  while (wants_[i].slot == CacheIndex::kNone) {
    issue_deferred();
    if (wants_[i].slot == CacheIndex::kNone) {
      // Room for an expert later in the list: take a slot out of order.
      const int32_t slot = start_read(layer_, wants_[i].expert, false);
      if (slot != CacheIndex::kNone) {
        index_.pin(slot);
        wants_[i].slot = slot;
      } else {
        wait_for_room();
      }
    }
  }
  return weights_of(i);
}

std::optional<size_t> ExpertCache::try_next(ExpertWeights* weights) {
  poll_loading();
  issue_deferred();
  for (size_t i = 0; i < n_wants_; ++i) {
    const Want& w = wants_[i];
    if (w.handed || w.released || w.slot == CacheIndex::kNone) continue;
    if (slots_[static_cast<size_t>(w.slot)].state != Slot::State::loading) {
      *weights = weights_of(i);
      return i;
    }
  }
  return std::nullopt;
}

size_t ExpertCache::wait_next(ExpertWeights* weights) {
  for (;;) {
    if (const std::optional<size_t> i = try_next(weights)) return *i;
    bool any_left = false, any_loading = false;
    for (size_t i = 0; i < n_wants_; ++i) {
      const Want& w = wants_[i];
      if (w.handed || w.released) continue;
      any_left = true;
      any_loading |= w.slot != CacheIndex::kNone;  // in a slot and not ready: loading
    }
    if (!any_left) throw Error(ErrorKind::internal, "ExpertCache::wait_next: every expert was handed out already");
    if (!any_loading) {
      wait_for_room();  // only deferred ones left: wait for a prefetch to land, or fail loudly
      continue;
    }
    waiting_.clear();
    for (size_t i = 0; i < n_wants_; ++i) {
      const Want& w = wants_[i];
      if (w.handed || w.released || w.slot == CacheIndex::kNone) continue;
      Slot& s = slots_[static_cast<size_t>(w.slot)];
      if (s.state != Slot::State::loading) continue;
      for (uint8_t k = 0; k < s.n_ops; ++k)
        if (!s.ops[k].finished()) waiting_.push_back(&s.ops[k]);
    }
    if (waiting_.empty()) continue;  // finished meanwhile
    const uint64_t t0 = now_ns();
    reader_.wait_any(waiting_);
    stats_.io_wait_ns += now_ns() - t0;
  }
}

void ExpertCache::release(size_t i) {
  if (i >= n_wants_ || wants_[i].released)
    throw Error(ErrorKind::internal, "ExpertCache::release: no such expert held");
  Want& w = wants_[i];
  if (w.slot != CacheIndex::kNone) index_.unpin(w.slot);
  w.released = true;
  poll_loading();
  issue_deferred();
}

void ExpertCache::wait_idle() {
  while (!loading_.empty()) {
    const Slot& s = slots_[static_cast<size_t>(loading_.back())];
    for (uint8_t k = 0; k < s.n_ops; ++k) reader_.wait_finished(s.ops[k]);
    poll_loading();
  }
}

uint32_t ExpertCache::preload() {
  if (index_.capacity() < moe_experts_ || moe_experts_ == 0) return 0;
  uint32_t n = 0;
  for (uint32_t l = 0; l < layout_.n_layers(); ++l) {
    if (!layout_.is_moe_layer(l)) continue;
    for (uint32_t e = 0; e < layout_.layer(l).n_expert; ++e) {
      if (index_.find(key(l, static_cast<int32_t>(e))) != CacheIndex::kNone) continue;
      if (start_read(l, static_cast<int32_t>(e), true) == CacheIndex::kNone)
        throw Error(ErrorKind::internal, "ExpertCache::preload: no free slot for layer " + std::to_string(l) +
                                             " expert " + std::to_string(e) + " in a cache that holds every expert");
      slots_[static_cast<size_t>(index_.find(key(l, static_cast<int32_t>(e))))].prefetched = false;
      ++n;
    }
    poll_loading();  // land (repack) what has arrived while later layers' reads go out
  }
  wait_idle();  // a failed read leaves its slot failed: the first acquire of it reads again and reports
  return n;
}

void ExpertCache::prefetch(uint32_t layer, std::span<const int32_t> experts) {
  if (!layout_.is_moe_layer(layer)) return;
  poll_loading();
  issue_deferred();
  stats_.prefetch_requested += experts.size();
  const bool demand_waiting = first_deferred_ < n_wants_;
  const uint32_t n_expert = layout_.layer(layer).n_expert;
  for (size_t j = 0; j < experts.size(); ++j) {
    const int32_t e = experts[j];
    if (e < 0 || static_cast<uint32_t>(e) >= n_expert)
      throw Error(ErrorKind::internal, "ExpertCache::prefetch: expert " + std::to_string(e) + " of layer " +
                                           std::to_string(layer) + " is out of range");
    const int32_t slot = index_.find(key(layer, e));
    if (slot != CacheIndex::kNone && slots_[static_cast<size_t>(slot)].state != Slot::State::failed) {
      ++stats_.prefetch_cached;
      continue;
    }
    if (demand_waiting || slot != CacheIndex::kNone || start_read(layer, e, true) == CacheIndex::kNone) {
      ++stats_.prefetch_skipped;
      continue;
    }
    ++stats_.prefetch_reads;
  }
}

}  // namespace ns::stream
