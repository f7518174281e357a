// Figures of the continuous-batching step loop (generation_batch.h): one
// BatchStepStats per forward pass, summed into BatchRunStats for the run.
//
// Where the numbers come from:
// - experts_used counts distinct (layer, expert) pairs the step routed to
//   (each is read or taken from the cache once per step, for every token
//   routed to it); experts_cached / experts_read split them into experts that
//   were in the expert cache before the step and experts read from disk
//   during it, on demand or by a prefetch (both 0 in io_mode mmap, which has
//   no cache).
// - bytes_read: weight bytes the reader delivered during the step (prefetches
//   for a later step included when they landed in this one); in io_mode mmap,
//   what the process's page faults made the kernel read (/proc/self/io).
// - io_wait_s: time the compute thread blocked on expert reads; compute_s is
//   the rest of the step's wall time (forward pass and sampling).
// - read_busy_s: wall time with at least one read in flight during the step,
//   so bytes_read / read_busy_s is the rate while reading.
// - keys: what attention costs grow with: a token at position p attends p + 1
//   keys, so a batch slows down as its contexts grow (daemon/lib/step_rate.h).
#pragma once

#include <cstdint>

namespace ns {

struct BatchStepStats {
  int32_t sequences = 0;        // sequences with at least one token in the forward pass
  int32_t tokens = 0;           // tokens in the forward pass
  int32_t decode_tokens = 0;    // of which next tokens of decoding sequences
  int32_t prefill_tokens = 0;   // of which prompt (or replayed checkpoint) tokens
  int32_t prefix_tokens = 0;    // prompt tokens copied from prefix snapshots, not computed (prefix_cache.h)
  int32_t generated = 0;        // completion tokens sampled by this step
  int64_t keys = 0;             // keys the step's tokens attend to in all: sum of (position + 1)
  uint32_t experts_used = 0;    // distinct (layer, expert) pairs routed to, over all MoE layers
  uint32_t experts_cached = 0;  // of which found in the expert cache
  uint32_t experts_read = 0;    // of which read from disk
  uint64_t bytes_read = 0;
  uint64_t prefetch_reads = 0, prefetch_used = 0;  // expert-cache prefetches issued / used
  double seconds = 0;                              // wall time of step()
  double io_wait_s = 0;
  double compute_s = 0;  // seconds - io_wait_s
  double read_busy_s = 0;
};

struct BatchRunStats {
  int64_t steps = 0;
  int64_t tokens = 0;  // tokens through the forward pass
  int64_t decode_tokens = 0, prefill_tokens = 0;
  int64_t prefix_tokens = 0;   // prompt tokens copied from prefix snapshots instead of prefilled
  int64_t generated = 0;       // completion tokens sampled
  int64_t sequence_steps = 0;  // sum over steps of BatchStepStats::sequences
  uint64_t experts_used = 0, experts_cached = 0, experts_read = 0;
  uint64_t bytes_read = 0;
  uint64_t prefetch_reads = 0, prefetch_used = 0;
  double seconds = 0, io_wait_s = 0, compute_s = 0, read_busy_s = 0;
  double decode_seconds = 0;  // wall time of the steps that decoded at least one token

  void add(const BatchStepStats& s);

  // Completion tokens per second of step time, over all sequences.
  // Completion tokens per second of the steps that decoded.
  double decode_tok_s() const { return decode_seconds > 0 ? double(generated) / decode_seconds : 0.0; }
  double tok_s() const { return seconds > 0 ? double(generated) / seconds : 0.0; }
  // Tokens of any kind (prompt and decode) through the forward pass per second.
  double forward_tok_s() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
  double bytes_per_generated_token() const { return generated > 0 ? double(bytes_read) / double(generated) : 0.0; }
  double bytes_per_step() const { return steps > 0 ? double(bytes_read) / double(steps) : 0.0; }
  double io_share() const { return seconds > 0 ? io_wait_s / seconds : 0.0; }
  double compute_share() const { return seconds > 0 ? compute_s / seconds : 0.0; }
  double read_gib_s() const { return read_busy_s > 0 ? double(bytes_read) / read_busy_s / double(1ull << 30) : 0.0; }
  double cache_hit_rate() const {
    return experts_cached + experts_read > 0 ? double(experts_cached) / double(experts_cached + experts_read) : 0.0;
  }
  double avg_batch_size() const { return steps > 0 ? double(sequence_steps) / double(steps) : 0.0; }
};

inline void BatchRunStats::add(const BatchStepStats& s) {
  ++steps;
  tokens += s.tokens;
  decode_tokens += s.decode_tokens;
  prefill_tokens += s.prefill_tokens;
  prefix_tokens += s.prefix_tokens;
  generated += s.generated;
  sequence_steps += s.sequences;
  experts_used += s.experts_used;
  experts_cached += s.experts_cached;
  experts_read += s.experts_read;
  bytes_read += s.bytes_read;
  prefetch_reads += s.prefetch_reads;
  prefetch_used += s.prefetch_used;
  seconds += s.seconds;
  io_wait_s += s.io_wait_s;
  compute_s += s.compute_s;
  read_busy_s += s.read_busy_s;
  if (s.decode_tokens > 0) decode_seconds += s.seconds;
}

}  // namespace ns
