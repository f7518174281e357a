// The vocabulary shared by both tokenizer models: token texts, scores and
// attributes, the special token ids, the end-of-generation set, and the
// splitting of text around special tokens (llama.cpp's tokenizer_st_partition).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace ns::tok {

// Token attributes, llama.cpp's llama_token_attr bits (types map onto them;
// a few tokens gain CONTROL or strip flags from the rules in vocab.cpp).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

enum class ModelKind { spm, bpe };

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A piece of the text to encode: either a special token or a byte range of raw text.
struct Fragment {
  int32_t token = -1;  // >= 0: this special token
  size_t offset = 0;   // raw text: [offset, offset + length)
  size_t length = 0;
};

struct Vocab {
  ModelKind kind = ModelKind::spm;
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint32_t> attr;
  std::vector<TokenType> declared_type;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false, clean_spaces = false;

  std::vector<int32_t> eog;                // sorted end-of-generation ids
  std::vector<int32_t> special_by_length;  // control/user-defined/unknown ids, longest text first

  // Fills everything but kind-specific data. `default_*` are the model's
  // defaults for absent keys (llama.cpp's per-model values).
  static Vocab build(const VocabSpec& spec, ModelKind kind, int32_t default_bos, int32_t default_eos,
                     int32_t default_unk, bool default_add_bos, bool default_add_space_prefix, bool clean_spaces);

  // special_tokens.cpp: text-recognised special tokens, the EOG set, strip flags.
  static void detect_special_tokens(Vocab& v);
  static void apply_strip_rules(Vocab& v, const VocabSpec& spec);

  int32_t n() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }
  void check_id(int32_t id) const;  // throws Error(invalid_input)
  bool is_eog(int32_t id) const;

  // Splits text at occurrences of special tokens: longer token texts first,
  // leftmost non-overlapping matches, control/unknown tokens only when
  // parse_special, user-defined ones always; LSTRIP/RSTRIP tokens swallow the
  // ASCII whitespace beside them.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
};

}  // namespace ns::tok
