// Chooses the next token from a row of logits with llama.cpp's common sampler
// chain: repetition penalty → top-k → top-p → min-p → temperature → softmax →
// a draw from the seeded RNG. temperature 0 is greedy: the argmax of the
// penalised logits, ties going to the lowest token id.
//
// Contract:
//  - Deterministic: the same params (seed included), logits and history give the
//    same token on any machine running this code. The RNG is std::mt19937_64,
//    whose output the C++ standard fixes, turned into a uniform double from its
//    top 53 bits (not std::uniform_real_distribution, which varies by library).
//  - Every sample() call consumes exactly one RNG output, greedy or not, so a
//    job resumed after n tokens continues identically after skip_draws(n).
//  - No heap allocation in sample() / distribution() (short of throwing): scratch
//    is sized to the vocabulary at construction.
//  - Cost: a few linear passes over the row. Small top_k is a heap during the
//    scan; top_p without top_k orders tokens only as far as its mass reaches.
//  - Logits must be finite or -inf (-inf = masked, never chosen); NaN or +inf
//    throws ns::Error(bad_model) (the weights are the likely cause); a logits
//    row of the wrong size or a history token outside the vocabulary throws
//    ns::Error(internal).
//  - Not thread-safe: one Sampler per sequence.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "common/sampling_params.h"

namespace ns::sampler {

// One token of the distribution a draw is made from.
struct TokenProb {
  int32_t id;
  float logit;  // after the repetition penalty, before temperature
  float p;      // probability after all filters and temperature; the kept set sums to 1
};

class Sampler {
 public:
  // Throws ns::Error(invalid_input) when params.validate() fails or vocab_size < 1.
  Sampler(const SamplingParams& params, int32_t vocab_size);

  // Picks the next token. `logits` has vocab_size entries and is modified in place (the
  // repetition penalty is applied to it). `history` is every token of the sequence so far,
  // prompt included (as llama.cpp's CLI and server feed it); the penalty looks at its last
  // repeat_last_n entries.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The kept tokens with their final probabilities: what sample() would draw from, without
  // drawing. Greedy gives the single argmax with p = 1. Order is deterministic: by descending
  // logit (ties by id) when top-k or top-p sorted the candidates, else by token id. The span
  // points into scratch and stays valid until the next call.
  std::span<const TokenProb> distribution(std::span<float> logits, std::span<const int32_t> history);

  // Advances the RNG as n sample() calls would (resuming a checkpointed job).
  void skip_draws(uint64_t n) { rng_.discard(n); }

  int32_t vocab_size() const { return vocab_size_; }

 private:
  void check_row(std::span<const float> logits, std::span<const int32_t> history) const;
  void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history);
  size_t keep_argmax(std::span<const float> logits);
  size_t collect_candidates(std::span<const float> logits);
  size_t collect_top_k(std::span<const float> logits);
  size_t keep_top_k(size_t n, bool* sorted);
  size_t keep_top_p(size_t n, bool* sorted);
  size_t keep_min_p(size_t n, bool sorted);
  void softmax_with_temperature(size_t n, bool sorted);
  double next_uniform();

  int32_t vocab_size_;
  float temperature_;
  int32_t top_k_;
  float top_p_;
  float min_p_;
  float repeat_penalty_;
  int32_t repeat_last_n_;
  std::mt19937_64 rng_;
  std::vector<TokenProb> candidates_;  // vocab_size entries: the working set of every call
  std::vector<uint8_t> penalised_;     // vocab_size flags, all 0 between calls
};

}  // namespace ns::sampler
