#include "engine/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace ns::sampler {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// top_k at most vocab / this is selected with a heap during the scan of the row; larger k with
// nth_element over all candidates, which is cheaper once many tokens would enter the heap.
constexpr int64_t kHeapTopKRatio = 8;

// A total order (ties broken by id) so that sorting and selection give the same
// arrangement with any standard library: the draw walks the candidates in order.
// A lambda object rather than a function, so that std::sort and friends inline it.
constexpr auto ranks_before = [](const TokenProb& a, const TokenProb& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

[[noreturn]] void throw_bad_logit(size_t id, float logit) {
  // bad_model: finite weights give finite logits, so the file is the likely cause (#30 N); the daemon and
  // `nightshift run` name the model and its file (daemon/lib/failure.h model_run_error).
  throw Error(ErrorKind::bad_model, "logit of token " + std::to_string(id) + " is " +
                                        (std::isnan(logit) ? "NaN" : "+inf") +
                                        ": the forward pass produced a non-finite value (damaged weights in the model "
                                        "file, or a fault in this build's kernels): check the file against its source "
                                        "(sha256sum) and download or convert it again; if a good copy fails so "
                                        "too, try cpu_features scalar (--cpu-features scalar)");
}

[[noreturn]] void throw_all_masked() {
  throw Error(ErrorKind::internal, "every logit is -inf: no token is allowed, nothing to sample");
}

float max_logit(const TokenProb* c, size_t n) {
  float m = -kInf;
  for (size_t i = 0; i < n; ++i) m = std::max(m, c[i].logit);
  return m;
}

// Moves the candidates in [first, last) with logit >= cutoff to the front with a plain forward
// pass (deterministic, unlike a library partition). Returns the split; *moved_weight is the sum
// of the moved candidates' p, *rest_max the largest logit left behind.
size_t partition_by_logit(TokenProb* c, size_t first, size_t last, float cutoff, double* moved_weight,
                          float* rest_max) {
  size_t split = first;
  double w = 0.0;
  float m = -kInf;
  for (size_t i = first; i < last; ++i) {
    if (c[i].logit >= cutoff) {
      w += c[i].p;
      std::swap(c[split], c[i]);
      ++split;
    } else {
      m = std::max(m, c[i].logit);
    }
  }
  *moved_weight = w;
  *rest_max = m;
  return split;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : vocab_size_(vocab_size),
      temperature_(params.temperature),
      top_k_(params.top_k),
      top_p_(params.top_p),
      min_p_(params.min_p),
      repeat_penalty_(params.repeat_penalty),
      repeat_last_n_(params.repeat_last_n),
      rng_(params.seed) {
  if (const std::string problem = params.validate(); !problem.empty())
    throw Error(ErrorKind::invalid_input, "sampling parameters: " + problem);
  if (vocab_size < 1)
    throw Error(ErrorKind::bad_model,
                "vocabulary size " + std::to_string(vocab_size) + ": a sampler needs at least one token");
  candidates_.resize(static_cast<size_t>(vocab_size));
  penalised_.assign(static_cast<size_t>(vocab_size), 0);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  const std::span<const TokenProb> kept = distribution(logits, history);
  const double u = next_uniform();  // drawn on every call: the RNG position counts tokens
  if (kept.size() == 1) return kept[0].id;

  double total = 0.0;
  for (const TokenProb& t : kept) total += t.p;
  // Inverse CDF in the deterministic candidate order.
  const double target = u * total;
  double cumulative = 0.0;
  for (const TokenProb& t : kept) {
    cumulative += t.p;
    if (target < cumulative) return t.id;
  }
  // u * total rounded up to total: take the last token that has any probability.
  for (size_t i = kept.size(); i-- > 0;)
    if (kept[i].p > 0.0f) return kept[i].id;
  return kept[0].id;
}

std::span<const TokenProb> Sampler::distribution(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.size() != static_cast<size_t>(vocab_size_))
    throw Error(ErrorKind::internal, "logits row has " + std::to_string(logits.size()) +
                                         " entries for a vocabulary of " + std::to_string(vocab_size_));
  apply_repeat_penalty(logits, history);

  // The filters below all keep the most likely token, so greedy needs none of them.
  if (temperature_ == 0.0f) return {candidates_.data(), keep_argmax(logits)};

  bool sorted = false;  // whether candidates_[0, n) is in ranks_before order
  size_t n = 0;
  if (top_k_ > 0 && static_cast<int64_t>(top_k_) * kHeapTopKRatio <= vocab_size_) {
    n = collect_top_k(logits);
    sorted = true;
  } else {
    n = collect_candidates(logits);
    n = keep_top_k(n, &sorted);
  }
  n = keep_top_p(n, &sorted);
  n = keep_min_p(n, sorted);
  softmax_with_temperature(n, sorted);
  return {candidates_.data(), n};
}

// llama.cpp semantics: each distinct token among the last repeat_last_n has its logit moved
// towards "less likely" once, however often it occurs: positive logits are divided by the
// penalty, negative ones multiplied.
void Sampler::apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history) {
  if (repeat_penalty_ == 1.0f || repeat_last_n_ == 0 || history.empty()) return;
  const auto window = history.last(std::min(history.size(), static_cast<size_t>(repeat_last_n_)));
  for (const int32_t t : window)
    if (t < 0 || t >= vocab_size_)
      throw Error(ErrorKind::internal, "history token " + std::to_string(t) + " is outside the vocabulary of " +
                                           std::to_string(vocab_size_));
  for (const int32_t t : window) {
    if (penalised_[t]) continue;
    penalised_[t] = 1;
    float& l = logits[t];
    l = l > 0.0f ? l / repeat_penalty_ : l * repeat_penalty_;
  }
  for (const int32_t t : window) penalised_[t] = 0;
}

size_t Sampler::keep_argmax(std::span<const float> logits) {
  size_t best = logits.size();
  float best_logit = -kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (!(l < kInf)) throw_bad_logit(i, l);  // NaN or +inf
    if (l > best_logit) {                    // strict: the first (lowest id) of equal maxima stays
      best = i;
      best_logit = l;
    }
  }
  if (best == logits.size()) throw_all_masked();
  candidates_[0] = {static_cast<int32_t>(best), best_logit, 1.0f};
  return 1;
}

size_t Sampler::collect_candidates(std::span<const float> logits) {
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (!(l < kInf)) throw_bad_logit(i, l);
    if (l == -kInf) continue;  // masked
    candidates_[n++] = {static_cast<int32_t>(i), l, 0.0f};
  }
  if (n == 0) throw_all_masked();
  return n;
}

// One pass over the row keeping the best k in a heap whose top is the worst of them: most tokens
// cost one comparison with that top. Tokens arrive in id order, so an equal logit never displaces
// a kept token (ties keep the lower id), matching ranks_before.
size_t Sampler::collect_top_k(std::span<const float> logits) {
  const size_t k = static_cast<size_t>(top_k_);
  TokenProb* heap = candidates_.data();
  size_t size = 0;
  float worst_kept = -kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (!(l < kInf)) throw_bad_logit(i, l);
    if (l == -kInf) continue;  // masked
    if (size < k) {
      heap[size++] = {static_cast<int32_t>(i), l, 0.0f};
      std::push_heap(heap, heap + size, ranks_before);
      worst_kept = heap[0].logit;
    } else if (l > worst_kept) {
      std::pop_heap(heap, heap + k, ranks_before);
      heap[k - 1] = {static_cast<int32_t>(i), l, 0.0f};
      std::push_heap(heap, heap + k, ranks_before);
      worst_kept = heap[0].logit;
    }
  }
  if (size == 0) throw_all_masked();
  std::sort_heap(heap, heap + size, ranks_before);
  return size;
}

// Large k: selection in O(n), then a sort of only the k survivors.
size_t Sampler::keep_top_k(size_t n, bool* sorted) {
  if (top_k_ <= 0 || static_cast<size_t>(top_k_) >= n) return n;
  const size_t k = static_cast<size_t>(top_k_);
  TokenProb* c = candidates_.data();
  std::nth_element(c, c + k, c + n, ranks_before);
  std::sort(c, c + k, ranks_before);
  *sorted = true;
  return k;
}

// Keeps the smallest set of most likely tokens whose probability (at temperature 1, over the
// current candidates, as in llama.cpp) reaches top_p. Unsorted input is ordered only as far as
// the walk needs: tokens come forward in bands of logit (within 1, 2, 4, ... of the maximum,
// each band one cheap pass over the rest), and within a band in chunks selected with nth_element
// and sorted, the first sized from the mass still needed. A peaked distribution so costs a few
// linear passes; a flat one about a full sort, which it needs.
size_t Sampler::keep_top_p(size_t n, bool* sorted) {
  if (top_p_ >= 1.0f || n <= 1) return n;
  TokenProb* c = candidates_.data();
  const float max = *sorted ? c[0].logit : max_logit(c, n);
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) {
    c[i].p = std::exp(c[i].logit - max);  // unnormalised weight, moves with its token when sorting
    z += c[i].p;
  }
  const double target = static_cast<double>(top_p_) * z;

  size_t ordered = *sorted ? n : 0;  // c[0, ordered) is sorted and ranks before the rest
  size_t band_end = ordered;         // c[ordered, band_end) ranks before c[band_end, n)
  float depth = 1.0f;                // bands reach down to max - depth, doubling
  float cutoff = max - depth;
  size_t chunk = 0;
  double cumulative = 0.0;
  size_t kept = 0;
  while (kept < n) {
    if (kept == ordered) {
      if (band_end == ordered) {
        double band_weight = 0.0;
        while (band_end == ordered) {
          float rest_max = -kInf;
          band_end = partition_by_logit(c, ordered, n, cutoff, &band_weight, &rest_max);
          if (band_end == ordered) {
            cutoff = rest_max;  // empty band: the next one starts at the best logit left, exactly
          } else {
            depth = std::max(2.0f * depth, 2.0f * (max - cutoff));
            cutoff = max - depth;
          }
        }
        // First chunk: the share of the band the remaining mass is likely to need, with a margin.
        const double share = std::min(1.0, (target - cumulative) / band_weight);
        const double band_size = static_cast<double>(band_end - ordered);
        chunk = std::max<size_t>(64, static_cast<size_t>(1.25 * share * band_size));
      }
      // Selecting a chunk only pays while it is a small part of what is left of the band.
      const size_t end = chunk * 2 < band_end - ordered ? ordered + chunk : band_end;
      if (end < band_end) std::nth_element(c + ordered, c + end, c + band_end, ranks_before);
      std::sort(c + ordered, c + end, ranks_before);
      ordered = end;
      chunk *= 4;
    }
    cumulative += c[kept].p;
    ++kept;
    if (cumulative >= target) break;
  }
  *sorted = true;  // c[0, kept) is the sorted prefix, and that is all that remains
  return kept;
}

// Keeps tokens at least min_p times as likely as the most likely one: logit >= max + log(min_p).
// Order is preserved, so a sorted set stays sorted and an unsorted one stays in id order.
size_t Sampler::keep_min_p(size_t n, bool sorted) {
  if (min_p_ <= 0.0f || n <= 1) return n;
  TokenProb* c = candidates_.data();
  const float threshold = (sorted ? c[0].logit : max_logit(c, n)) + std::log(min_p_);
  if (sorted) {
    size_t kept = 1;
    while (kept < n && c[kept].logit >= threshold) ++kept;
    return kept;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (c[i].logit >= threshold) c[kept++] = c[i];
  return kept;
}

void Sampler::softmax_with_temperature(size_t n, bool sorted) {
  TokenProb* c = candidates_.data();
  const float max = sorted ? c[0].logit : max_logit(c, n);
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) {
    c[i].p = std::exp((c[i].logit - max) / temperature_);
    z += c[i].p;
  }
  for (size_t i = 0; i < n; ++i) c[i].p = static_cast<float>(c[i].p / z);
}

// 53 random bits scaled into [0, 1): exact, and the same on every platform.
double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

}  // namespace ns::sampler
