#include "engine/model/routing.h"

#include <cmath>

namespace ns {

float RoutingEvent::margin(int64_t t) const {
  if (scores == nullptr) return INFINITY;
  const float* row = scores + t * n_expert;
  const int32_t* ids = chosen + t * n_used;
  const auto score = [&](int64_t e) { return selection_bias ? row[e] + selection_bias[e] : row[e]; };
  float weakest = INFINITY, best_other = -INFINITY;
  for (int64_t k = 0; k < n_used; ++k) weakest = std::fmin(weakest, score(ids[k]));
  for (int64_t e = 0; e < n_expert; ++e) {
    bool taken = false;
    for (int64_t k = 0; k < n_used; ++k) taken |= ids[k] == e;
    if (!taken) best_other = std::fmax(best_other, score(e));
  }
  return best_other == -INFINITY ? INFINITY : weakest - best_other;
}

}  // namespace ns
