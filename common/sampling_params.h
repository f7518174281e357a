// How a job wants its tokens chosen and when it stops. Shared by the engine,
// the queue (stored per job) and the CLI flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ns {

inline constexpr int32_t kMaxChoices = 128;

struct SamplingParams {
  int32_t max_tokens = 128;       // completion tokens at most
  float temperature = 0.8f;       // 0 means greedy
  int32_t top_k = 40;             // 0 disables
  float top_p = 0.95f;            // 1 disables
  float min_p = 0.05f;            // 0 disables
  float repeat_penalty = 1.0f;    // 1 disables
  int32_t repeat_last_n = 64;     // tokens the penalty looks back over
  uint64_t seed = 0;              // same seed, same text
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
  // Constrained decoding: a GBNF grammar (engine/grammar/grammar.h) every
  // completion must follow; "" = none. JSON schemas and JSON mode are compiled
  // to this text at submit time (engine/grammar/json_schema.h).
  std::string grammar;
  // Output shape (docs/batch-jsonl.md): n choices from one prompt, choice k
  // drawn with seed + k; per generated token, its logprob and the top_logprobs
  // most likely alternatives (engine/sampler/logprobs.h says which distribution).
  int32_t n = 1;  // 1..kMaxChoices (and at most the daemon's max_batch)
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20; needs logprobs

  // Empty when valid, else a message naming the bad field and its allowed range.
  std::string validate() const;
};

}  // namespace ns
