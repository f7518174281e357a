#include "engine/tokenizer/bpe_encoder.h"

#include <queue>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/utf8.h"

namespace ns::tok {

BpeEncoder::BpeEncoder(const Vocab& vocab, const std::vector<std::string>& merges, PreType pre, bool ignore_merges)
    : vocab_(vocab), pre_(pre), ignore_merges_(ignore_merges) {
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Split at the first space after the first character, as llama.cpp does.
    // Byte-level token texts never contain a space (it is spelled 'Ġ'), so the
    // line itself is the lookup key "left right".
    if (merges[i].find(' ', 1) == std::string::npos) continue;
    ranks_.try_emplace(merges[i], static_cast<int32_t>(i));
  }
}

int32_t BpeEncoder::rank(std::string_view left, std::string_view right, std::string& key) const {
  key.assign(left);
  key.push_back(' ');
  key.append(right);
  auto it = ranks_.find(std::string_view(key));
  return it == ranks_.end() ? -1 : it->second;
}

namespace {

struct Symbol {
  int prev;
  int next;
  uint32_t offset;
  uint32_t len;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  uint32_t len;
};

// Lowest rank first; on a tie the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeEncoder::encode_word(const std::string& word, std::vector<int32_t>& out, std::string& key) const {
  if (ignore_merges_) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(utf8_seq_len(static_cast<unsigned char>(word[off])), word.size() - off);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, off + len == word.size() ? -1 : index + 1, static_cast<uint32_t>(off),
                       static_cast<uint32_t>(len)});
    off += len;
  }
  const std::string_view w(word);
  const auto text_of = [&](const Symbol& s) { return w.substr(s.offset, s.len); };

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t r = rank(text_of(symbols[left]), text_of(symbols[right]), key);
    if (r < 0) return;
    queue.push({left, right, r, symbols[left].len + symbols[right].len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& left = symbols[bg.left];
    Symbol& right = symbols[bg.right];
    // Stale entry (symbols only grow, so an unchanged length means unchanged text).
    if (left.len == 0 || right.len == 0 || left.len + right.len != bg.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bg.left;
    try_add(left.prev, bg.left);
    try_add(bg.left, left.next);
  }

  for (const Symbol& s : symbols) {
    if (s.len == 0) continue;
    const std::string_view piece = text_of(s);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary (only with incomplete vocabularies): llama.cpp
    // looks each byte of the spelling up as a one-byte token and drops misses.
    for (char c : piece) {
      const int32_t bt = vocab_.find(std::string_view(&c, 1));
      if (bt >= 0) out.push_back(bt);
    }
  }
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  // Invalid UTF-8 becomes U+FFFD first, as in llama.cpp: byte-level
  // vocabularies often have no token for bytes like 0xFF (never valid UTF-8),
  // and DeepSeek's declare theirs user-defined, which decode as characters.
  std::string sanitized;
  if (!utf8_is_valid(text)) {
    sanitized = utf8_sanitize(text);
    text = sanitized;
  }
  std::vector<WordSpan> words;
  pre_.split(text, words);
  std::string word, key;
  for (const WordSpan& span : words) {
    word.clear();
    append_byte_encoded(word, text.substr(span.first, span.second - span.first));
    encode_word(word, out, key);
  }
}

}  // namespace ns::tok
