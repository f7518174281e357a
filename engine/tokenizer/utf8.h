// UTF-8 helpers shared by the tokenizers.
//
// Contract: decoding never reads past the end of its input and never throws.
// It follows llama.cpp's unicode_cpts_from_utf8 exactly, because the
// pre-tokenizers' split points depend on how bytes group into code points:
// a lead byte whose continuation bytes are missing or malformed, a stray
// continuation byte and bytes F8..FF each become one U+FFFD of length 1;
// overlong forms and surrogates are decoded as written (no further checks).
// Strict UTF-8 (is this text valid? repair it) is common/utf8.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ns::tok {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Bytes in the sequence a lead byte announces (1 for ASCII and stray
// continuation bytes), from the high nibble alone, as SentencePiece does.
inline size_t utf8_seq_len(unsigned char lead) {
  static constexpr unsigned char kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

struct DecodedChar {
  uint32_t cpt;  // kReplacementChar for an invalid sequence
  uint32_t len;  // bytes consumed, >= 1
};

// Decodes the code point starting at text[pos] (pos < text.size()).
DecodedChar utf8_decode_at(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of cpt; values outside Unicode's range or in the
// surrogate block are written as U+FFFD so the output is always valid UTF-8.
void utf8_append(std::string& out, uint32_t cpt);
std::string utf8_encode(uint32_t cpt);

// Code points of `text` and the byte offset where each starts in it, plus a
// final entry text.size() (so char i spans [offsets[i], offsets[i+1])).
struct CodepointText {
  std::vector<uint32_t> cpts;
  std::vector<uint32_t> offsets;
};
CodepointText utf8_decode_all(std::string_view text);

// `text` with every invalid byte replaced by U+FFFD (and overlong forms
// re-encoded, surrogates and values above U+10FFFF replaced), code point by
// code point as utf8_decode_at reads them: what llama.cpp's BPE path feeds
// its pre-tokenizer. Valid text comes back unchanged.
std::string utf8_sanitize(std::string_view text);

}  // namespace ns::tok
