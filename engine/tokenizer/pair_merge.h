// The merge loop BPE (bpe_encoder.cpp) and SentencePiece (spm_encoder.cpp)
// share, as llama.cpp's tokenizers run it: text cut into symbols (one per
// character), then, until no adjacent pair can merge, the best pair merges
// into its left symbol; on a tie the leftmost pair. The encoders differ only
// in what a pair is worth (BPE: the lowest merge rank; SPM: the highest
// vocabulary score of the merged text) and in how a symbol becomes tokens.
//
// Contract: O(n log n) in the number of symbols; header-only so that the
// encoders' lambdas inline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace ns::tok {

struct MergeSymbol {
  int prev;         // -1: the first
  int next;         // -1: the last
  uint32_t offset;  // into the text
  uint32_t len;     // 0 once merged into its left neighbour
};

// `text` as a chain of symbols of char_len(text, offset) bytes each.
template <class CharLen>
std::vector<MergeSymbol> merge_symbols(std::string_view text, CharLen char_len) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = char_len(text, off);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(
        {index - 1, off + len == text.size() ? -1 : index + 1, static_cast<uint32_t>(off), static_cast<uint32_t>(len)});
    off += len;
  }
  return symbols;
}

// Merges pairs of `symbols` until none can: worth(left, right) is the pair's
// worth (std::optional<Worth>; none: the pair does not merge) and
// better(a, b) says worth a merges before worth b.
template <class Worth, class WorthOf, class Better>
void merge_pairs(std::vector<MergeSymbol>& symbols, WorthOf worth, Better better) {
  struct Pair {
    int left, right;
    Worth worth;
    uint32_t len;  // of the merged text when queued
  };
  // The queue's top is the best pair; on a tie the leftmost.
  const auto after = [&](const Pair& a, const Pair& b) {
    return better(b.worth, a.worth) || (a.worth == b.worth && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(after)> queue(after);
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::optional<Worth> w = worth(symbols[left], symbols[right]);
    if (!w) return;
    queue.push({left, right, *w, symbols[left].len + symbols[right].len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[p.left];
    MergeSymbol& right = symbols[p.right];
    // Stale entry: one side was merged elsewhere since it was queued (symbols
    // only grow, so an unchanged length means unchanged text).
    if (left.len == 0 || right.len == 0 || left.len + right.len != p.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = p.left;
    try_add(left.prev, p.left);
    try_add(p.left, left.next);
  }
}

}  // namespace ns::tok
