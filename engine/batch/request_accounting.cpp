#include "engine/batch/request_accounting.h"

#include <algorithm>

#include "engine/state/process_stats.h"

namespace ns {
namespace {

double ms_between(RequestShare::Clock::time_point a, RequestShare::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

StepMeter::StepMeter(const Model& model) : model_(model), t_(std::chrono::steady_clock::now()) {
  experts_routed_ = model.experts_routed();
  if (model.streaming().reader)
    stream_ = model.stream_stats();
  else
    disk_bytes_ = process_read_bytes();
}

void StepMeter::measure(BatchStepStats& st) const {
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_).count();
  st.experts_used = static_cast<uint32_t>(model_.experts_routed() - experts_routed_);
  if (model_.streaming().reader) {
    const stream::StreamStats d = model_.stream_stats() - stream_;
    // A hit on an expert a prefetch read during this step came from the disk too.
    const uint64_t prefetched = std::min(d.cache.prefetch_used, d.cache.hits);
    st.experts_cached = static_cast<uint32_t>(d.cache.hits - prefetched);
    st.experts_read = static_cast<uint32_t>(d.cache.misses + prefetched);
    st.bytes_read = d.reader.bytes_read;
    st.prefetch_reads = d.cache.prefetch_reads;
    st.prefetch_used = d.cache.prefetch_used;
    st.io_wait_s = double(d.cache.io_wait_ns) * 1e-9;
    st.read_busy_s = double(d.reader.busy_ns) * 1e-9;
  } else {
    const uint64_t now = process_read_bytes();
    st.bytes_read = now > disk_bytes_ ? now - disk_bytes_ : 0;
  }
  st.compute_s = std::max(0.0, st.seconds - st.io_wait_s);
}

void RequestShare::fill(GenerationStats& st, bool decoding, int64_t filled, size_t decoded) {
  const auto now = Clock::now();
  if (!decoding) t_decode = now;
  st.prefill_ms = ms_between(t_start, t_decode);
  st.decode_ms = ms_between(t_decode, now);
  st.prefill_tok_s = st.prefill_ms > 0 ? filled * 1000.0 / st.prefill_ms : 0;
  st.decode_tok_s = st.decode_ms > 0 && decoded > 0 ? decoded * 1000.0 / st.decode_ms : 0;
  st.peak_rss_bytes = peak_rss_bytes();
  st.bytes_read = bytes;
  st.read_gib_s = read_busy_s > 0 ? double(bytes) / read_busy_s / double(1ull << 30) : 0;
  st.io_wait_ms = io_wait_s * 1e3;
  st.compute_ms = compute_s * 1e3;
  st.cache_hit_rate = lookups ? double(hits) / double(lookups) : 0;
  // A prefetch read in one step may be used in the next: the ratio is of sums, capped at 1.
  st.prefetch_accuracy = prefetch_reads ? std::min(1.0, double(prefetch_used) / double(prefetch_reads)) : 0;
  st.batch_steps = steps;
  st.avg_batch_size = steps ? double(batch_sum) / steps : 0;
  st.decode_share_ms = decode_share_s * 1e3;
}

void attribute(const BatchStepStats& st, std::span<RequestShare* const> shares, std::span<const int32_t> tokens,
               std::span<const int32_t> decoded) {
  if (st.tokens <= 0) return;
  uint64_t given = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    if (tokens[i] == 0 || !shares[i]) continue;
    RequestShare& s = *shares[i];
    const double share = double(tokens[i]) / double(st.tokens);
    const uint64_t bytes =
        static_cast<uint64_t>((static_cast<unsigned __int128>(st.bytes_read) * static_cast<uint64_t>(tokens[i])) /
                              static_cast<uint64_t>(st.tokens));
    s.bytes += bytes;
    given += bytes;
    s.io_wait_s += share * st.io_wait_s;
    s.compute_s += share * st.compute_s;
    s.read_busy_s += share * st.read_busy_s;
    if (st.decode_tokens > 0) s.decode_share_s += st.seconds * decoded[i] / st.decode_tokens;
    s.hits += st.experts_cached;
    s.lookups += st.experts_cached + st.experts_read;
    s.prefetch_reads += st.prefetch_reads;
    s.prefetch_used += st.prefetch_used;
    ++s.steps;
    s.batch_sum += st.sequences;
  }
  for (size_t i = 0; i < shares.size() && given < st.bytes_read; ++i)
    if (tokens[i] > 0 && shares[i]) {
      ++shares[i]->bytes;
      ++given;
    }
}

void merge_choice_stats(std::span<GenerationResult> results, double read_busy_s) {
  GenerationStats& st = results[0].stats;
  double decoded_all = st.decode_tok_s * st.decode_ms / 1000.0;  // choice 0's tokens decoded (not replayed)
  for (size_t c = 1; c < results.size(); ++c) {
    const GenerationStats& o = results[c].stats;
    st.completion_tokens += o.completion_tokens;
    st.bytes_read += o.bytes_read;
    st.io_wait_ms += o.io_wait_ms;
    st.compute_ms += o.compute_ms;
    st.decode_share_ms += o.decode_share_ms;
    st.decode_ms = std::max(st.decode_ms, o.decode_ms);
    st.batch_steps = std::max(st.batch_steps, o.batch_steps);
    st.peak_rss_bytes = std::max(st.peak_rss_bytes, o.peak_rss_bytes);
    decoded_all += o.decode_tok_s * o.decode_ms / 1000.0;
  }
  st.decode_tok_s = st.decode_ms > 0 ? decoded_all * 1000.0 / st.decode_ms : 0;
  st.read_gib_s = read_busy_s > 0 ? double(st.bytes_read) / read_busy_s / double(1ull << 30) : 0;
}

}  // namespace ns
