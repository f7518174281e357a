// The tokenizer.* metadata of a generated model: a small built-in byte-level
// BPE vocabulary, or every tokenizer.* key copied from a vocabulary GGUF.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/gguf/gguf_file.h"

namespace ns::make_model {

struct Vocabulary {
  std::vector<std::pair<std::string, gguf::Value>> metadata;  // tokenizer.* keys, in file order
  uint32_t n_vocab = 0;
  std::string source;  // for the summary
};

// Byte-level BPE as GPT-2 defines it (tokenizer.ggml.model "gpt2", pre-tokenizer
// "gpt-2"): the 256 byte tokens in GPT-2's byte-to-unicode order, kBuiltinMerges
// merges learned deterministically from a built-in English text, then the
// control tokens <|bos|> and <|eos|>. 512 tokens in all; add_bos_token true.
// `pre` replaces only the tokenizer.ggml.pre value (e.g. "kimi-k2", to test
// another pre-tokenizer on the same tokens and merges); it is not checked.
inline constexpr size_t kBuiltinMerges = 254;
inline constexpr const char* kBuiltinPre = "gpt-2";
Vocabulary builtin_vocabulary(const std::string& pre = kBuiltinPre);

// Every tokenizer.* key of the GGUF at `path` (e.g. ../shared/vocab/ggml-vocab-llama-spm.gguf).
// Throws ns::Error (io / bad_model) naming the path if it cannot be read or has no tokens.
Vocabulary vocabulary_from_gguf(const std::string& path);

// GPT-2's byte-to-unicode mapping: the UTF-8 text standing for byte b.
std::string byte_to_unicode(uint8_t b);

}  // namespace ns::make_model
