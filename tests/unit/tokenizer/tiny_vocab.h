// Small hand-built vocabularies for the tokenizer unit tests.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/tokenizer.h"

namespace tiny {

// A byte-level BPE vocabulary: the 256 byte characters (ids 0..255, id = byte
// value) followed by `extra` tokens (ids 256...), with the given merges.
inline ns::VocabSpec bpe(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                         const std::string& pre = "gpt-2") {
  ns::VocabSpec s;
  s.model = "gpt2";
  s.pre = pre;
  for (int b = 0; b < 256; ++b) s.tokens.push_back(ns::tok::byte_to_unicode(static_cast<uint8_t>(b)));
  for (const auto& t : extra) s.tokens.push_back(t);
  s.merges = merges;
  return s;
}

// A SentencePiece vocabulary: <unk> <s> </s>, then (if with_bytes) the 256
// <0xXX> byte tokens (ids 3..258), then `pieces` with `scores`.
inline ns::VocabSpec spm(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                         bool with_bytes = true) {
  ns::VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.scores = {0, 0, 0};
  s.token_types = {2, 3, 3};
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      s.tokens.push_back(hex);
      s.scores.push_back(0);
      s.token_types.push_back(6);
    }
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    s.tokens.push_back(pieces[i]);
    s.scores.push_back(scores.at(i));
    s.token_types.push_back(1);
  }
  return s;
}

inline int32_t id_of(const ns::Tokenizer& t, const std::string& text) {
  const int32_t id = t.find_token(text);
  if (id < 0) throw std::runtime_error("no token '" + text + "' in the test vocabulary");
  return id;
}

inline std::vector<int32_t> ids_of(const ns::Tokenizer& t, const std::vector<std::string>& texts) {
  std::vector<int32_t> ids;
  for (const auto& s : texts) ids.push_back(id_of(t, s));
  return ids;
}

}  // namespace tiny
