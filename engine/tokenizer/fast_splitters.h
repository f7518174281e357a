// Hand-written splitters for the two most common pre-tokenizer regexes and for
// Kimi K2's, ported from llama.cpp's unicode_regex_split_custom_gpt2/_llama3/
// _kimi_k2 so that their results (which the conformance vectors record) are
// reproduced exactly:
//
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Kimi K2: HAN+|[^\r\n\p{L}\p{N}]?(?:(?!HAN)\p{L})+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// The Kimi K2 line is what llama.cpp's function does, which is less than the
// regex of Kimi's tokenization_kimi.py that its comment quotes: no case rules
// (an upper-case run followed by a lower-case one stays one word: "HelloWorld"),
// \p{M} is not a letter (a combining mark splits a word and leads the next one,
// as any non-letter does), the contractions ignore ASCII case only, and HAN is
// a fixed list of ranges (kimi_k2_is_han), narrower than Unicode's Script=Han:
// U+3005 々 (Lm) is an ordinary letter here, like kana and hangul.
//
// Whitespace is Unicode White_Space (so U+0085 counts) and the end of the
// piece being split counts as "not \S" for the lookahead, as in llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ns::tok {

extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kLlama3PatternCaseless;  // the (?i:...) spelling of the same pattern
// The Kimi K2 line above as a PCRE2 pattern (HAN spelled out from kimi_k2_is_han's ranges).
const std::string& kimi_k2_pattern();

// llama.cpp's unicode_cpt_is_han: CJK Unified Ideographs with Extensions A-F,
// and the CJK Compatibility Ideographs with their Supplement.
bool kimi_k2_is_han(uint32_t cpt);

// Split cpts[begin, end) and append the lengths (in code points) of the pieces.
void split_gpt2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths);
void split_llama3_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths);
void split_kimi_k2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths);

}  // namespace ns::tok
