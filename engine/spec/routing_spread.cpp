#include "engine/spec/routing_spread.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ns {

void RoutingSpread::observe(const RoutingEvent& e) {
  Counts& c = counts_[e.layer];
  if (c.per_expert.size() < static_cast<size_t>(e.n_expert)) c.per_expert.resize(static_cast<size_t>(e.n_expert));
  c.tokens += e.n_tokens;
  c.n_used = e.n_used;
  for (int64_t i = 0; i < e.n_tokens * e.n_used; ++i) ++c.per_expert[static_cast<size_t>(e.chosen[i])];
}

std::vector<LayerSpread> RoutingSpread::layers() const {
  std::vector<LayerSpread> out;
  for (const auto& [layer, c] : counts_) {
    LayerSpread s;
    s.layer = layer;
    s.tokens = c.tokens;
    s.n_expert = static_cast<int64_t>(c.per_expert.size());
    int64_t busiest = 0;
    for (int64_t n : c.per_expert) {
      s.choices += n;
      s.distinct += n > 0;
      busiest = std::max(busiest, n);
    }
    if (s.choices > 0) {
      s.busiest_share = double(busiest) / double(s.choices);
      for (int64_t n : c.per_expert)
        if (n > 0) {
          const double p = double(n) / double(s.choices);
          s.entropy_bits -= p * std::log2(p);
        }
    }
    out.push_back(s);
  }
  return out;
}

LayerSpread RoutingSpread::mean(const std::vector<LayerSpread>& layers) {
  LayerSpread m;
  m.layer = -1;
  if (layers.empty()) return m;
  double distinct = 0;
  for (const LayerSpread& s : layers) {
    m.tokens = std::max(m.tokens, s.tokens);
    m.choices = std::max(m.choices, s.choices);
    m.n_expert = std::max(m.n_expert, s.n_expert);
    distinct += double(s.distinct);
    m.busiest_share += s.busiest_share;
    m.entropy_bits += s.entropy_bits;
  }
  const double n = double(layers.size());
  m.distinct = std::llround(distinct / n);
  m.busiest_share /= n;
  m.entropy_bits /= n;
  return m;
}

std::string RoutingSpread::describe(const LayerSpread& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: %lld tokens, %lld of %lld experts touched, busiest expert %.1f%% of choices (uniform %.1f%%), "
                "entropy %.2f of %.2f bits",
                s.layer < 0 ? "mean over layers" : ("layer " + std::to_string(s.layer)).c_str(),
                static_cast<long long>(s.tokens), static_cast<long long>(s.distinct),
                static_cast<long long>(s.n_expert), 100.0 * s.busiest_share,
                s.n_expert > 0 ? 100.0 / double(s.n_expert) : 0.0, s.entropy_bits,
                s.n_expert > 0 ? std::log2(double(s.n_expert)) : 0.0);
  return buf;
}

}  // namespace ns
