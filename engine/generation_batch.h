// Continuous batching: several generations advance together, one forward pass
// per step over the next token of every sequence (and prompt chunks of the
// ones still prefilling), so every weight - each routed expert above all - is
// read once per step for all of them. Requests join and leave at any step.
//
// Each sequence keeps its own sampler, seed, stop strings and limits; its
// tokens are the same as when it runs alone (the forward pass computes every
// token independently of the others in the batch).
//
// Not thread-safe. Uses the model's KV-cache sequences; at most
// model.n_seq() requests are active at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop_matcher.h"

namespace ns {

struct GenerationRequest {
  std::string prompt;
  SamplingParams params;
  ProgressFn on_progress;        // optional; false cancels this request only
  std::vector<int32_t> resume;   // checkpointed completion tokens to replay
};

class GenerationBatch {
 public:
  explicit GenerationBatch(Model& model);
  ~GenerationBatch();

  // Tokenizes and validates; throws ns::Error(invalid_input) for a bad request
  // (the batch is unchanged). Returns the request's handle. Requires free() > 0.
  int add(GenerationRequest request);
  int free_slots() const;
  int active() const;

  // One forward pass over all active requests. Returns false when none is active.
  bool step();
  // Requests that finished since the last call, with their handles.
  std::vector<std::pair<int, GenerationResult>> take_finished();

  // Runs requests to completion, up to n_seq at a time, results in request order.
  static std::vector<GenerationResult> run_all(Model& model, std::vector<GenerationRequest> requests);

 private:
  struct Sequence;
  void finish(Sequence& s, const char* reason);
  Model& model_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // index = KV-cache sequence
  std::vector<BatchToken> batch_;
  std::vector<Sequence*> batch_owner_;            // which sequence asked for each logits row
  std::vector<float> logits_;
  std::vector<std::pair<int, GenerationResult>> finished_;
  int next_handle_ = 0;
};

}  // namespace ns
