// Observing the router: which experts each MoE layer chose for each token of
// a forward pass. A bench prints the spread from it (routing_spread.h); tests
// check batching against it. Set with Model::set_routing_observer.
//
// The observer is called on the compute thread once per MoE layer per forward
// pass, after routing and before the experts run; the pointers are valid only
// during the call.
#pragma once

#include <cstdint>
#include <functional>

namespace ns {

struct RoutingEvent {
  int64_t layer = 0;                // block index
  int64_t n_tokens = 0;             // tokens in the forward pass
  int64_t n_used = 0;               // experts per token
  int64_t n_expert = 0;             // experts in the layer
  const int32_t* chosen = nullptr;  // [n_tokens][n_used] expert ids
  const float* weights = nullptr;   // [n_tokens][n_used] their weights
  int64_t distinct = 0;             // distinct experts among chosen
  // [n_tokens][n_expert] the gated router output the choice compared, plus
  // selection_bias[e] where the layer has one (null otherwise).
  const float* scores = nullptr;
  const float* selection_bias = nullptr;
  // Group-limited routing (n_groups > 1): experts in n_groups equal groups,
  // chosen only from the n_groups_used groups whose two best scores sum highest.
  int64_t n_groups = 0, n_groups_used = 0;
  // Hash routing (deepseek4's first layers): the token id chose, no score was compared.
  bool by_token = false;

  // How close token t's choice was to another: the weakest chosen expert's
  // score less the best unchosen one's (0 for an exact tie; infinity when
  // every expert is chosen). Group-limited: the closer of the group choice
  // (the weakest chosen group's score less the best other group's) and the
  // expert choice within the chosen groups. A choice this close flips under
  // any rounding change, in the reference as here, so conformance tests skip
  // the tokens that had one. By token: infinity.
  float margin(int64_t t) const;
};

using RoutingObserver = std::function<void(const RoutingEvent&)>;

}  // namespace ns
