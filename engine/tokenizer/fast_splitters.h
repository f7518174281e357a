// Hand-written splitters for the two most common pre-tokenizer regexes, ported
// from llama.cpp's unicode_regex_split_custom_gpt2/_llama3 so that their
// results (which the conformance vectors record) are reproduced exactly:
//
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Whitespace is Unicode White_Space (so U+0085 counts) and the end of the
// piece being split counts as "not \S" for the lookahead, as in llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ns::tok {

extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kLlama3PatternCaseless;  // the (?i:...) spelling of the same pattern

// Split cpts[begin, end) and append the lengths (in code points) of the pieces.
void split_gpt2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths);
void split_llama3_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths);

}  // namespace ns::tok
