// Per-request accounting for the batch step loop (generation_batch.h): a
// step's figures measured around its forward pass, each request's share of
// them, and the GenerationStats a finished request reports, filled as
// Engine::generate fills them (docs/architecture.md, "Per-request accounting").
//
// Contract: a step's bytes_read, io_wait, compute and read time are shared
// among the sequences in it in proportion to their tokens in the forward pass;
// bytes in whole bytes, so that the shares of a step sum exactly to its
// bytes_read (the remainder one byte each to the first sequences), the rest
// within floating-point rounding. decode_share splits the time of a step that
// decoded evenly among the tokens it decoded, so the shares of a run sum to
// BatchRunStats::decode_seconds. cache_hit_rate and prefetch_accuracy are the
// ratios over the steps a request took part in; avg_batch_size the mean
// number of sequences in them.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "engine/api/batch_stats.h"
#include "engine/api/generation.h"
#include "engine/model/model.h"

namespace ns {

// The model's counters at the start of a step; measure() gives the step's figures.
class StepMeter {
 public:
  explicit StepMeter(const Model& model);
  // Sets st's seconds, experts_*, bytes_read, prefetch_*, io_wait_s, compute_s and read_busy_s: since construction.
  void measure(BatchStepStats& st) const;

 private:
  const Model& model_;
  std::chrono::steady_clock::time_point t_;
  stream::StreamStats stream_;
  uint64_t experts_routed_ = 0;
  uint64_t disk_bytes_ = 0;  // without a reader (io_mode mmap): what page faults read
};

// One sequence's share of the steps it took part in, and its clock.
struct RequestShare {
  using Clock = std::chrono::steady_clock;
  Clock::time_point t_start, t_decode;  // joined; prefill done (or finished)
  uint64_t bytes = 0;
  double io_wait_s = 0, compute_s = 0, read_busy_s = 0;
  double decode_share_s = 0;  // of the steps that decoded
  uint64_t hits = 0, lookups = 0, prefetch_reads = 0, prefetch_used = 0;
  int32_t steps = 0;
  int64_t batch_sum = 0;  // sequences in each of its steps, summed

  // Fills the stats of a sequence finishing now that computed `filled` tokens
  // before decoding (prompt + replay) and decoded `decoded` of its tokens;
  // `decoding`: its prefill completed (else it counts as prefill until now).
  void fill(GenerationStats& st, bool decoding, int64_t filled, size_t decoded);
};

// Shares the step `st` among its sequences: shares[i] (null: none) had
// tokens[i] tokens in its forward pass, decoded[i] of them decode tokens.
void attribute(const BatchStepStats& st, std::span<RequestShare* const> shares, std::span<const int32_t> tokens,
               std::span<const int32_t> decoded);

// A request of n > 1 choices: results[0].stats becomes the request's. The
// prompt counts once; the completion tokens and the shares of the steps sum
// over the choices, times are the longest; read_busy_s is the choices' sum.
void merge_choice_stats(std::span<GenerationResult> results, double read_busy_s);

}  // namespace ns
