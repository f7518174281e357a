#include "engine/tokenizer/bpe_encoder.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "common/utf8.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/pair_merge.h"
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

void BpeEncoder::encode_word(const std::string& word, std::vector<int32_t>& out, std::string& key) const {
  if (ignore_merges_) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const std::string_view w(word);
  std::vector<MergeSymbol> symbols = merge_symbols(w, [](std::string_view t, size_t off) {
    return std::min(utf8_seq_len(static_cast<unsigned char>(t[off])), t.size() - off);
  });
  const auto text_of = [&](const MergeSymbol& s) { return w.substr(s.offset, s.len); };
  // Lowest rank first.
  merge_pairs<int32_t>(
      symbols,
      [&](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<int32_t> {
        const int32_t r = rank(text_of(left), text_of(right), key);
        if (r < 0) return std::nullopt;
        return r;
      },
      std::less<int32_t>());

  for (const MergeSymbol& s : symbols) {
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
  if (!valid_utf8(text)) {
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
