// SentencePiece-style encoding (tokenizer.ggml.model "llama"), as llama.cpp's
// llm_tokenizer_spm: start from one symbol per UTF-8 character (or invalid byte), repeatedly
// merge the adjacent pair whose concatenation is the vocabulary entry with the
// highest score (ties: leftmost), then emit each symbol's token, or its bytes
// as <0xXX> byte-fallback tokens when it is not in the vocabulary.
//
// Contract: the caller has already escaped spaces to U+2581 and added the
// leading space; O(n log n) in the text length; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace ns::tok {

class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // The token that stands for a raw byte: <0xXX>, else the one-byte text,
  // else the unknown token (llama.cpp would abort), else -1 (the byte is dropped).
  int32_t byte_token(uint8_t b) const { return byte_tokens_[b]; }

 private:
  const Vocab& vocab_;
  std::array<int32_t, 256> byte_tokens_{};
};

}  // namespace ns::tok
