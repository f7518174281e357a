// Byte-level BPE pre-tokenization: splitting text into the words that BPE
// merges run inside, per tokenizer.ggml.pre.
//
// Like llama.cpp, a pre-tokenizer is a list of regexes applied in turn: each
// one splits every piece the previous ones produced into its matches and the
// (non-empty) gaps between them. The GPT-2, Llama-3 and Kimi K2 patterns run
// through hand-written splitters that reproduce llama.cpp's own fast paths; every
// other pattern runs through PCRE2 (UTF + UCP, JIT) on the text with each
// non-ASCII whitespace character replaced by U+000B, which is how llama.cpp
// makes its regexes treat all Unicode whitespace as \s.
//
// Contract: split() covers its input exactly (the words concatenate back to
// the text, invalid UTF-8 bytes included) and is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ns::tok {

class Regex;

enum class PreType {
  default_,
  llama3,
  dbrx,
  deepseek_llm,
  deepseek_coder,
  deepseek3_llm,
  falcon,
  starcoder,
  gpt2,
  qwen2,
  qwen35,
  kimi_k2,
  chatglm4,  // GLM-4 / GLM-4.5: Llama 3's regex, without its ignore_merges, no default BOS
  gpt4o
};

// What a tokenizer.ggml.pre name implies, as llama.cpp's vocabulary loader sets it.
struct PreTokenizerInfo {
  PreType type = PreType::default_;
  bool ignore_merges = false;   // a word that is already a token skips the merges (Llama 3)
  bool clean_spaces = true;     // decode() removes spaces before punctuation (HF clean_up_tokenization_spaces)
  std::optional<bool> add_bos;  // a default for when tokenizer.ggml.add_bos_token is absent
  bool default_bos = true;      // false: no BOS id unless tokenizer.ggml.bos_token_id names one (chatglm4)
};

// Throws ns::Error(bad_model) naming the unknown value and the supported ones.
// An empty name means "default", as in llama.cpp (which warns about it).
PreTokenizerInfo resolve_pre_tokenizer(const std::string& name);
std::string supported_pre_tokenizer_names();

// The regexes llama.cpp applies for a pre-tokenizer type, in order.
std::vector<std::string> pre_tokenizer_patterns(PreType type);

// A word: byte range [begin, end) of the text that was split.
using WordSpan = std::pair<uint32_t, uint32_t>;

class PreTokenizer {
 public:
  explicit PreTokenizer(PreType type);
  // From explicit patterns; with use_fast_paths=false even the GPT-2/Llama-3/
  // Kimi K2 patterns go through PCRE2 (tests compare the two).
  explicit PreTokenizer(const std::vector<std::string>& patterns, bool use_fast_paths = true);

  void split(std::string_view text, std::vector<WordSpan>& words) const;

 private:
  enum class StepKind { gpt2, llama3, kimi_k2, regex };
  struct Step {
    StepKind kind;
    std::shared_ptr<const Regex> re;
  };
  std::vector<Step> steps_;
};

}  // namespace ns::tok
