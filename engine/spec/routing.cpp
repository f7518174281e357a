#include "engine/spec/routing.h"

#include <cmath>
#include <vector>

namespace ns {

float RoutingEvent::margin(int64_t t) const {
  if (by_token) return INFINITY;
  if (scores == nullptr) return INFINITY;
  const float* row = scores + t * n_expert;
  const int32_t* ids = chosen + t * n_used;
  const auto score = [&](int64_t e) { return selection_bias ? row[e] + selection_bias[e] : row[e]; };
  // The groups the router could choose from (all of them without a group limit).
  const bool grouped = n_groups > 1 && n_groups_used < n_groups;
  const int64_t group_size = grouped ? n_expert / n_groups : n_expert;
  std::vector<char> allowed(static_cast<size_t>(grouped ? n_groups : 1), 1);
  float group_margin = INFINITY;
  if (grouped) {
    std::vector<float> gs(static_cast<size_t>(n_groups));
    for (int64_t g = 0; g < n_groups; ++g) {
      float top1 = -INFINITY, top2 = -INFINITY;
      for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) {
        const float v = score(e);
        if (v > top1)
          top2 = top1, top1 = v;
        else if (v > top2)
          top2 = v;
      }
      gs[g] = group_size > 1 ? top1 + top2 : top1;
      allowed[g] = 0;
    }
    float weakest_group = INFINITY;
    for (int64_t k = 0; k < n_groups_used; ++k) {
      int64_t best = -1;
      for (int64_t g = 0; g < n_groups; ++g)
        if (!allowed[g] && (best < 0 || gs[g] > gs[best])) best = g;
      allowed[best] = 1;
      weakest_group = std::fmin(weakest_group, gs[best]);
    }
    float best_other_group = -INFINITY;
    for (int64_t g = 0; g < n_groups; ++g)
      if (!allowed[g]) best_other_group = std::fmax(best_other_group, gs[g]);
    group_margin = weakest_group - best_other_group;
  }
  float weakest = INFINITY, best_other = -INFINITY;
  for (int64_t k = 0; k < n_used; ++k) weakest = std::fmin(weakest, score(ids[k]));
  for (int64_t e = 0; e < n_expert; ++e) {
    if (!allowed[grouped ? e / group_size : 0]) continue;
    bool taken = false;
    for (int64_t k = 0; k < n_used; ++k) taken |= ids[k] == e;
    if (!taken) best_other = std::fmax(best_other, score(e));
  }
  return std::fmin(group_margin, best_other == -INFINITY ? INFINITY : weakest - best_other);
}

}  // namespace ns
