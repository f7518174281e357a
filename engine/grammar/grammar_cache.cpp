#include "engine/grammar/grammar_cache.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <iterator>
#include <limits>

namespace ns::grammar {

std::shared_ptr<GrammarCache::Entry> GrammarCache::get(const std::string& text, const Tokenizer& tok) {
  const uint64_t h = text_hash(text);
  if (const auto it = by_hash_.find(h); it != by_hash_.end())
    for (const auto& e : it->second)
      if (e->g.source == text) return e;
  auto e = std::make_shared<Entry>(Entry{parse_gbnf(text), MaskCache()});
  if (count_ >= kKept) forget_unused();
  by_hash_[h].push_back(e);
  ++count_;
  if (!trie_) trie_ = TokenTrie::from_tokenizer(tok);
  return e;
}

void GrammarCache::forget_unused() {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    auto& bucket = it->second;
    const size_t before = bucket.size();
    std::erase_if(bucket, [](const std::shared_ptr<Entry>& e) { return e.use_count() == 1; });
    count_ -= before - bucket.size();
    it = bucket.empty() ? by_hash_.erase(it) : std::next(it);
  }
}

bool GrammarCache::constrain(Entry& e, const Matcher& m, float* logits, int64_t n_vocab) {
  const auto t0 = std::chrono::steady_clock::now();
  const TokenMask& mask = e.cache.mask(m, *trie_);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const int64_t n_mask = trie_->n_vocab();  // the output may have rows past the tokenizer's tokens
  bool any = false;
  const int64_t n = std::min(n_mask, n_vocab);
  for (size_t w = 0; w < mask.size(); ++w) {
    const uint64_t bits = mask[w];
    const int64_t base = static_cast<int64_t>(w) * 64, end = std::min<int64_t>(base + 64, n);
    if (bits == 0) {  // whole words forbidden (most of them outside strings): one fill
      if (base < end) std::fill(logits + base, logits + end, kMasked);
      continue;
    }
    any = true;
    for (uint64_t off = ~bits; off != 0; off &= off - 1) {  // each forbidden token of the word
      const int64_t id = base + std::countr_zero(off);
      if (id < end) logits[id] = kMasked;
    }
  }
  for (int64_t id = n_mask; id < n_vocab; ++id) logits[id] = kMasked;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return any;
}

}  // namespace ns::grammar
