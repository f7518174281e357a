// Log-probabilities of generated tokens (OpenAI's `logprobs` / `top_logprobs`).
//
// Which distribution: the log-softmax of the model's raw logits for that
// position, before the repetition penalty, top-k, top-p, min-p and
// temperature: log p(t) = logit(t) - log(sum_v exp(logit(v))). That is what the
// OpenAI API and vLLM report, and llama.cpp's server by default; it does not
// depend on how the token was drawn, so a greedy and a sampled job report the
// same numbers for the same token at the same position. Computed in double,
// stored as float.
//
// What is recorded per generated token: the chosen token's logprob, then the
// k most likely tokens of the row (k = top_logprobs, 0..20, capped at the
// vocabulary size), by descending logit, ties by lower id. A token masked
// with -inf has logprob -inf.
//
// Storage: ChoiceLogprobs keeps a choice's records flat, (1 + k) entries per
// token; encode() turns the records of every choice of a job into one string
// (base64 of a little-endian binary record, 8 bytes per entry: 4 + 4 bytes
// of header, 4 bytes of count per choice), the one column a job's result or
// checkpoint holds them in; decode() reverses it exactly (floats bit for bit).
// A result also carries the text of every token id its records name (4 + 4
// bytes + the piece each, after the choices), so an export needs no model.
//
// Cost: one copy of the row and one pass of exp() over it per token, plus a
// heap of k during the scan; nothing when logprobs are off. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace ns::sampler {

inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  bool operator==(const TokenLogprob&) const = default;
};

// One choice's records: for token i, entries [i*(k+1)] (the chosen token) and
// [i*(k+1)+1, (i+1)*(k+1)) (the top k, most likely first).
struct ChoiceLogprobs {
  int32_t k = 0;
  std::vector<TokenLogprob> entries;

  size_t tokens() const { return entries.size() / static_cast<size_t>(k + 1); }
  const TokenLogprob& chosen(size_t i) const { return entries[i * static_cast<size_t>(k + 1)]; }
  std::span<const TokenLogprob> top(size_t i) const {
    return {entries.data() + i * static_cast<size_t>(k + 1) + 1, static_cast<size_t>(k)};
  }
  // Keeps the first n tokens' records.
  void truncate(size_t n) { entries.resize(std::min(entries.size(), n * static_cast<size_t>(k + 1))); }
  bool operator==(const ChoiceLogprobs&) const = default;
};

// Computes the records of one sequence. observe() before the sampler changes
// the row (the repetition penalty edits it in place), append() once the token
// is chosen.
class LogprobRecorder {
 public:
  // top_k is capped at vocab_size.
  LogprobRecorder(int32_t top_k, int32_t vocab_size);
  int32_t k() const { return k_; }
  // Remembers the log-normaliser and the top k of this raw logits row
  // (vocab_size entries, finite or -inf).
  void observe(std::span<const float> logits);
  // Appends the record of `chosen` (a token of the last observed row) to out.
  void append(int32_t chosen, ChoiceLogprobs& out) const;

 private:
  int32_t k_, vocab_;
  std::vector<float> row_;
  double log_z_ = 0;
  std::vector<TokenLogprob> top_;
};

// Token id -> its text (raw bytes; a piece may be part of a UTF-8 character).
using TokenPieces = std::map<int32_t, std::string>;

// Every choice's records in one string (see the header), with `pieces` when
// given; "" for no choices.
std::string encode_logprobs(std::span<const ChoiceLogprobs> choices, const TokenPieces* pieces = nullptr);
// Throws std::invalid_argument naming the problem when `text` is not what
// encode_logprobs() writes. `pieces` (optional) receives the token texts.
std::vector<ChoiceLogprobs> decode_logprobs(const std::string& text, TokenPieces* pieces = nullptr);

}  // namespace ns::sampler
