#include "engine/tokenizer/spm_encoder.h"

#include <cstdio>
#include <queue>

#include "engine/tokenizer/utf8.h"

namespace ns::tok {

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    const char raw = static_cast<char>(b);
    if (id < 0) id = vocab.find(std::string_view(&raw, 1));
    if (id < 0) id = vocab.unk;
    byte_tokens_[b] = id;
  }
}

namespace {

struct Symbol {
  int prev;
  int next;
  uint32_t offset;  // into the text
  uint32_t len;     // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  uint32_t len;
};

// Highest score first; on a tie the leftmost pair (llama.cpp's order).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    // One symbol per character; an invalid byte is a symbol of its own.
    // (llama.cpp sizes symbols by the lead byte alone, so an invalid lead byte
    // swallows the next bytes, e.g. the first byte of an escaped space; the
    // result is the same for valid UTF-8.)
    const size_t len = utf8_decode_at(text, off).len;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, off + len == text.size() ? -1 : index + 1, static_cast<uint32_t>(off),
                       static_cast<uint32_t>(len)});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = symbols[left].len + symbols[right].len;
    const int32_t id = vocab_.find(text.substr(symbols[left].offset, len));
    if (id < 0) return;
    queue.push({left, right, vocab_.score[id], len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& left = symbols[bg.left];
    Symbol& right = symbols[bg.right];
    // Stale entry: one side was merged elsewhere since it was queued.
    if (left.len == 0 || right.len == 0 || left.len + right.len != bg.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bg.left;
    try_add(left.prev, bg.left);
    try_add(bg.left, left.next);
  }

  // Every merged symbol is a vocabulary entry by construction; a symbol still
  // a single character may not be, and then falls back to its bytes.
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.len);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char b : piece) {
      const int32_t bt = byte_tokens_[b];
      if (bt >= 0) out.push_back(bt);
    }
  }
}

}  // namespace ns::tok
