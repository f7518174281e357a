// How widely a model routes: per MoE layer, over the tokens observed, the
// number of distinct experts chosen, the busiest expert's share of all
// (token, slot) choices and the entropy of the expert load. A model whose
// random weights route every token to the same few experts makes caches look
// perfect and streaming look free (tests/bench/README.md, "Honest benchmark models"):
// benches print this next to their figures.
//
// Not thread-safe; observe() is a RoutingObserver body (see routing.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/spec/routing.h"

namespace ns {

struct LayerSpread {
  int64_t layer = 0;
  int64_t tokens = 0;   // tokens observed
  int64_t choices = 0;  // (token, slot) choices = tokens * n_used
  int64_t n_expert = 0;
  int64_t distinct = 0;      // experts chosen at least once
  double busiest_share = 0;  // the most chosen expert's share of the choices (uniform: 1 / n_expert)
  double entropy_bits = 0;   // of the choice distribution over experts (uniform: log2 n_expert)
};

class RoutingSpread {
 public:
  void observe(const RoutingEvent& e);
  void reset() { counts_.clear(); }
  std::vector<LayerSpread> layers() const;  // in layer order

  // Means over layers, and one line per layer / a summary line for printing.
  static LayerSpread mean(const std::vector<LayerSpread>& layers);
  static std::string describe(const LayerSpread& s);

 private:
  struct Counts {
    int64_t tokens = 0, n_used = 0;
    std::vector<int64_t> per_expert;
  };
  std::map<int64_t, Counts> counts_;
};

}  // namespace ns
