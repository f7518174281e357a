#include "engine/tokenizer/spm_encoder.h"

#include <cstdio>
#include <functional>
#include <optional>

#include "engine/tokenizer/pair_merge.h"
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

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  // One symbol per character; an invalid byte is a symbol of its own.
  // (llama.cpp sizes symbols by the lead byte alone, so an invalid lead byte
  // swallows the next bytes, e.g. the first byte of an escaped space; the
  // result is the same for valid UTF-8.)
  std::vector<MergeSymbol> symbols =
      merge_symbols(text, [](std::string_view t, size_t off) { return utf8_decode_at(t, off).len; });
  // Highest score of the merged text first.
  merge_pairs<float>(
      symbols,
      [&](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<float> {
        const int32_t id = vocab_.find(text.substr(left.offset, left.len + right.len));
        if (id < 0) return std::nullopt;
        return vocab_.score[id];
      },
      std::greater<float>());

  // Every merged symbol is a vocabulary entry by construction; a symbol still
  // a single character may not be, and then falls back to its bytes.
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const MergeSymbol& s = symbols[i];
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
