#include "engine/tokenizer/pretokenizer.h"

#include <algorithm>

#include "engine/tokenizer/fast_splitters.h"
#include "engine/tokenizer/pcre_regex.h"
#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"
#include "common/error.h"

namespace ns::tok {

namespace {

struct PreName {
  const char* name;
  PreType type;
  bool clean_spaces;
  bool ignore_merges;
  int add_bos;  // -1: no default, else 0/1
};

// tokenizer.ggml.pre values and what llama.cpp's loader sets for them.
// Names that only alias one of the supported regex lists are accepted too.
constexpr PreName kPreNames[] = {
    {"default", PreType::default_, true, false, -1},
    {"llama3", PreType::llama3, true, true, 1},
    {"llama-v3", PreType::llama3, true, true, 1},
    {"llama-bpe", PreType::llama3, true, true, 1},
    {"falcon3", PreType::llama3, true, true, 1},
    {"falcon-h1", PreType::llama3, true, true, 1},
    {"pixtral", PreType::llama3, true, true, 1},
    {"midm-2.0", PreType::llama3, true, true, 1},
    {"lfm2", PreType::llama3, true, true, 1},
    {"dbrx", PreType::dbrx, true, false, -1},
    {"smaug-bpe", PreType::dbrx, true, false, -1},
    {"deepseek-llm", PreType::deepseek_llm, false, false, -1},
    {"deepseek-coder", PreType::deepseek_coder, false, false, -1},
    {"deepseek-v3", PreType::deepseek3_llm, false, false, -1},
    {"hunyuan-dense", PreType::deepseek3_llm, false, false, -1},
    {"falcon", PreType::falcon, true, false, -1},
    {"starcoder", PreType::starcoder, true, false, -1},
    {"refact", PreType::starcoder, true, false, -1},
    {"command-r", PreType::starcoder, false, false, -1},
    {"smollm", PreType::starcoder, false, false, -1},
    {"codeshell", PreType::starcoder, true, false, -1},
    {"exaone", PreType::starcoder, true, false, -1},
    {"minerva-7b", PreType::starcoder, true, false, -1},
    {"gpt-2", PreType::gpt2, true, false, -1},
    {"phi-2", PreType::gpt2, true, false, -1},
    {"jina-es", PreType::gpt2, true, false, -1},
    {"jina-de", PreType::gpt2, true, false, -1},
    {"jina-v2-es", PreType::gpt2, true, false, -1},
    {"jina-v2-de", PreType::gpt2, true, false, -1},
    {"gigachat", PreType::gpt2, true, false, -1},
    {"a.x-4.0", PreType::gpt2, true, false, -1},
    {"mellum", PreType::gpt2, true, false, -1},
    {"exaone4", PreType::gpt2, true, false, -1},
    {"mpt", PreType::gpt2, true, false, -1},
    {"olmo", PreType::gpt2, true, false, -1},
    {"jais", PreType::gpt2, true, false, -1},
    {"qwen2", PreType::qwen2, false, false, -1},
    // llama.cpp's BAILINGMOE list (Ling/Ring) is qwen2's but for \s*[\r\n] where qwen2 has \s*[\r\n]+,
    // which match the same spans (the longest whitespace run ending in a line break).
    {"bailingmoe", PreType::qwen2, false, false, -1},
    {"bailingmoe2", PreType::qwen2, false, false, -1},
    {"deepseek-r1-qwen", PreType::qwen2, false, false, -1},
    {"megrez", PreType::qwen2, true, false, -1},
    {"stablelm2", PreType::qwen2, true, false, -1},
    {"hunyuan", PreType::qwen2, false, false, -1},
    {"kormo", PreType::qwen2, false, false, -1},
    {"f2llmv2", PreType::qwen2, false, false, -1},
    {"qwen35", PreType::qwen35, false, false, -1},
    {"kimi-k2", PreType::kimi_k2, false, false, -1},
    {"glm4", PreType::chatglm4, true, false, -1},
    {"chatglm-bpe", PreType::chatglm4, true, false, -1},
    {"gpt-4o", PreType::gpt4o, false, false, -1},
    {"minimax-m2", PreType::gpt4o, false, false, -1},  // llama.cpp gives MINIMAX_M2 GPT-4o's regex list
};

}  // namespace

PreTokenizerInfo resolve_pre_tokenizer(const std::string& name) {
  const std::string key = name.empty() ? "default" : name;
  for (const PreName& p : kPreNames) {
    if (key == p.name) {
      PreTokenizerInfo info;
      info.type = p.type;
      info.clean_spaces = p.clean_spaces;
      info.ignore_merges = p.ignore_merges;
      if (p.add_bos >= 0) info.add_bos = p.add_bos == 1;
      info.default_bos = p.type != PreType::chatglm4;  // llama.cpp clears its BOS default for these
      return info;
    }
  }
  throw Error(ErrorKind::bad_model, "tokenizer.ggml.pre '" + name + "' is not a supported pre-tokenizer; supported: " +
                                        supported_pre_tokenizer_names());
}

std::string supported_pre_tokenizer_names() {
  std::string s;
  for (const PreName& p : kPreNames) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::vector<std::string> pre_tokenizer_patterns(PreType type) {
  // Character ranges are written as \x{...} so that no editor or Unicode
  // normalisation can change them (the DeepSeek lists contain compatibility
  // characters such as U+212A KELVIN SIGN that NFC would fold to ASCII).
  switch (type) {
    case PreType::llama3:
    case PreType::dbrx:
    case PreType::chatglm4:  // llama.cpp's CHATGLM4 list is the same single regex
      return {kLlama3Pattern};
    case PreType::deepseek_llm:
      return {
          R"re([\r\n])re",
          // Cased letters (DeepSeek's tokenizer.json spells \p{LC} out as ranges).
          R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})re"
          R"re(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})re"
          R"re(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})re"
          R"re(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})re"
          R"re(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})re"
          R"re(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
          R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})re"
          R"re(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})re"
          R"re(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
          R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})re"
          R"re(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})re"
          R"re(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
          R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re",
          R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
          R"re(\s+$)re",
          R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
          R"re(\p{N}+)re",
      };
    case PreType::deepseek_coder:
      return {
          R"re([\r\n])re",    R"re(\s?\p{L}+)re",
          R"re(\s?\p{P}+)re", R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
          R"re(\p{N})re",
      };
    case PreType::deepseek3_llm:
      // llama.cpp's \p{S} leaves out '~' for ASCII text (its table of ASCII
      // symbols omits it), so '~' is spelled out of [\p{P}\p{S}] and into the
      // negated class here to split identically.
      return {
          R"re(\p{N}{1,3})re",
          R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
          R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|(?:[^\r\n\p{L}\p{P}\p{S}]|~)?[\p{L}\p{M}]+| ?(?:(?!~)[\p{P}\p{S}])+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
      };
    case PreType::falcon: return {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2Pattern, R"re([0-9][0-9][0-9])re"};
    case PreType::starcoder: return {R"re(\p{N})re", kGpt2Pattern};
    case PreType::gpt2: return {kGpt2Pattern};
    case PreType::qwen2:
      return {
          R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case PreType::qwen35:
      // As qwen2, with combining marks (\p{M}) inside letter runs and out of punctuation runs.
      return {
          R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case PreType::kimi_k2: return {kimi_k2_pattern()};
    case PreType::gpt4o:
      // The form llama.cpp runs (gpt-oss, GPT-4o): tokenizer.json's case
      // classes \p{Lu}... written as letters that are not a-z / not A-Z.
      return {
          R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
          R"re(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
          R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case PreType::default_: break;
  }
  return {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2Pattern, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"};
}

PreTokenizer::PreTokenizer(PreType type) : PreTokenizer(pre_tokenizer_patterns(type)) {}

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, bool use_fast_paths) {
  for (const std::string& p : patterns) {
    if (use_fast_paths && p == kGpt2Pattern) {
      steps_.push_back({StepKind::gpt2, nullptr});
    } else if (use_fast_paths && (p == kLlama3Pattern || p == kLlama3PatternCaseless)) {
      steps_.push_back({StepKind::llama3, nullptr});
    } else if (use_fast_paths && p == kimi_k2_pattern()) {
      steps_.push_back({StepKind::kimi_k2, nullptr});
    } else {
      steps_.push_back({StepKind::regex, Regex::compile(p)});
    }
  }
}

namespace {

// The text as the regexes see it: valid UTF-8 in which every non-ASCII
// whitespace character is U+000B (so \s matches exactly the White_Space set,
// as in llama.cpp) and every undecodable byte, surrogate or out-of-range value
// is U+FFFD. byte_at[i] is where code point i starts; byte_at[n] is the end.
struct RegexSubject {
  std::string text;
  std::vector<uint32_t> byte_at;

  explicit RegexSubject(const std::vector<uint32_t>& cpts) {
    text.reserve(cpts.size() + cpts.size() / 2);
    byte_at.reserve(cpts.size() + 1);
    for (uint32_t c : cpts) {
      byte_at.push_back(static_cast<uint32_t>(text.size()));
      if (c >= 0x80 && is_unicode_whitespace(c)) c = 0x0B;
      utf8_append(text, c);  // maps surrogates and values > U+10FFFF to U+FFFD
    }
    byte_at.push_back(static_cast<uint32_t>(text.size()));
  }
  size_t cpt_index(size_t byte) const {
    return static_cast<size_t>(std::lower_bound(byte_at.begin(), byte_at.end(), byte) - byte_at.begin());
  }
};

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<WordSpan>& words) const {
  words.clear();
  if (text.empty()) return;
  const CodepointText ct = utf8_decode_all(text);
  const std::vector<uint32_t>& cpts = ct.cpts;

  std::unique_ptr<RegexSubject> subject;  // built on first use
  std::vector<uint32_t> pieces = {static_cast<uint32_t>(cpts.size())};
  std::vector<uint32_t> next;
  for (const Step& step : steps_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    size_t start = 0;
    for (uint32_t len : pieces) {
      const size_t end = start + len;
      switch (step.kind) {
        case StepKind::gpt2: split_gpt2_fast(cpts, start, end, next); break;
        case StepKind::llama3: split_llama3_fast(cpts, start, end, next); break;
        case StepKind::kimi_k2: split_kimi_k2_fast(cpts, start, end, next); break;
        case StepKind::regex: {
          if (!subject) subject = std::make_unique<RegexSubject>(cpts);
          const size_t b0 = subject->byte_at[start];
          const std::string_view piece(subject->text.data() + b0, subject->byte_at[end] - b0);
          size_t done = start;  // code points of this piece already emitted
          step.re->for_each_match(piece, [&](size_t mb, size_t me) {
            const size_t cb = subject->cpt_index(b0 + mb);
            const size_t ce = subject->cpt_index(b0 + me);
            if (cb > done) next.push_back(static_cast<uint32_t>(cb - done));  // the gap before the match
            next.push_back(static_cast<uint32_t>(ce - cb));
            done = ce;
          });
          if (done < end) next.push_back(static_cast<uint32_t>(end - done));
          break;
        }
      }
      start = end;
    }
    pieces.swap(next);
  }

  words.reserve(pieces.size());
  size_t at = 0;
  for (uint32_t len : pieces) {
    words.emplace_back(ct.offsets[at], ct.offsets[at + len]);
    at += len;
  }
}

}  // namespace ns::tok
