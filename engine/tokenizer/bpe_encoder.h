// Byte-level BPE encoding (tokenizer.ggml.model "gpt2"), as llama.cpp's
// llm_tokenizer_bpe: pre-tokenize into words, spell each word's bytes with
// GPT-2's byte-to-unicode characters, then repeatedly merge the adjacent pair
// with the lowest merge rank (ties: leftmost) and emit each symbol's token.
//
// Contract: O(n log n) per word; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace ns::tok {

class BpeEncoder {
 public:
  // merges: "left right" lines; a line's index is its rank (the first of duplicates wins).
  BpeEncoder(const Vocab& vocab, const std::vector<std::string>& merges, PreType pre, bool ignore_merges);
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // Rank of merging `left` and `right`, or -1. `key` is scratch space.
  int32_t rank(std::string_view left, std::string_view right, std::string& key) const;

 private:
  void encode_word(const std::string& word, std::vector<int32_t>& out, std::string& key) const;

  const Vocab& vocab_;
  PreTokenizer pre_;
  bool ignore_merges_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ranks_;  // "left right" -> rank
};

}  // namespace ns::tok
