#include "engine/tokenizer/vocab.h"

#include <algorithm>

#include "common/error.h"

namespace ns::tok {

namespace {

uint32_t attr_of_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::unknown: return kAttrUnknown;
    case TokenType::unused: return kAttrUnused;
    case TokenType::normal: return kAttrNormal;
    case TokenType::control: return kAttrControl;
    case TokenType::user_defined: return kAttrUserDefined;
    case TokenType::byte: return kAttrByte;
    case TokenType::undefined: return kAttrUndefined;
  }
  return kAttrUndefined;
}

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

Vocab Vocab::build(const VocabSpec& spec, ModelKind kind, int32_t default_bos, int32_t default_eos, int32_t default_unk,
                   bool default_add_bos, bool default_add_space_prefix, bool clean_spaces) {
  Vocab v;
  v.kind = kind;
  const size_t n = spec.tokens.size();
  if (n == 0) throw Error(ErrorKind::bad_model, "tokenizer.ggml.tokens is empty: the file has no vocabulary");
  if (n > static_cast<size_t>(INT32_MAX))
    throw Error(ErrorKind::bad_model, "tokenizer.ggml.tokens has too many entries");
  if (!spec.scores.empty() && spec.scores.size() < n)
    throw Error(ErrorKind::bad_model, "tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
                                          " entries for " + std::to_string(n) + " tokens");
  if (!spec.token_types.empty() && spec.token_types.size() < n)
    throw Error(ErrorKind::bad_model, "tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
                                          " entries for " + std::to_string(n) + " tokens");

  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, kAttrNormal);
  v.declared_type.assign(n, TokenType::normal);
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string word = spec.tokens[i];
    if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's placeholder
    auto [it, inserted] = v.ids.emplace(word, static_cast<int32_t>(i));
    if (!inserted) {
      throw Error(ErrorKind::bad_model, "tokenizer.ggml.tokens has a duplicate entry '" + word + "' (ids " +
                                            std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
    v.text[i] = std::move(word);
    if (!spec.scores.empty()) v.score[i] = spec.scores[i];
    if (!spec.token_types.empty()) {
      v.attr[i] = attr_of_type(spec.token_types[i]);
      const int32_t t = spec.token_types[i];
      v.declared_type[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::undefined;
    }
  }

  // Special ids: the model's defaults unless the metadata names an id inside
  // the vocabulary (an out-of-range id is ignored, as llama.cpp does).
  const auto pick = [&](int32_t def, const std::optional<int64_t>& given) {
    int32_t id = (def >= 0 && static_cast<size_t>(def) < n) ? def : -1;
    if (given && *given >= 0 && static_cast<uint64_t>(*given) < n) id = static_cast<int32_t>(*given);
    return id;
  };
  v.bos = pick(default_bos, spec.bos_id);
  v.eos = pick(default_eos, spec.eos_id);
  v.unk = pick(default_unk, spec.unk_id);
  v.eot = pick(-1, spec.eot_id);
  v.eom = pick(-1, spec.eom_id);
  v.sep = pick(-1, spec.sep_id);
  v.pad = pick(-1, spec.pad_id);
  v.mask = pick(-1, spec.mask_id);
  v.fim_pre = pick(-1, spec.fim_pre_id);
  v.fim_suf = pick(-1, spec.fim_suf_id);
  v.fim_mid = pick(-1, spec.fim_mid_id);
  v.fim_pad = pick(-1, spec.fim_pad_id);
  v.fim_rep = pick(-1, spec.fim_rep_id);
  v.fim_sep = pick(-1, spec.fim_sep_id);

  v.add_bos = spec.add_bos.value_or(default_add_bos);
  v.add_eos = spec.add_eos.value_or(false);
  v.add_space_prefix = spec.add_space_prefix.value_or(default_add_space_prefix);
  v.clean_spaces = clean_spaces;
  if (v.add_bos && v.bos < 0)
    throw Error(ErrorKind::bad_model,
                "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  if (v.add_eos && v.eos < 0)
    throw Error(ErrorKind::bad_model,
                "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");

  detect_special_tokens(v);

  for (size_t i = 0; i < n; ++i)
    if (v.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v.special_by_length.push_back(static_cast<int32_t>(i));
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(),
                   [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });

  apply_strip_rules(v, spec);
  return v;
}

void Vocab::check_id(int32_t id) const {
  if (id < 0 || id >= n())
    throw Error(ErrorKind::invalid_input,
                "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n()) + ")");
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog.begin(), eog.end(), id); }

std::vector<Fragment> Vocab::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> out;
  for (int32_t id : special_by_length) {
    if (!parse_special && (attr[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = this->text[id];
    out.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f);
        continue;
      }
      size_t start = f.offset;
      const size_t end = f.offset + f.length;
      while (start < end) {
        const size_t match = text.substr(0, end).find(tok, start);
        if (match == std::string_view::npos) break;
        changed = true;
        size_t left_len = match - start;
        if (attr[id] & kAttrLstrip)
          while (left_len > 0 && is_ascii_space(text[start + left_len - 1])) --left_len;
        if (left_len > 0) out.push_back({-1, start, left_len});
        out.push_back({id, 0, 0});
        start = match + tok.size();
        if (attr[id] & kAttrRstrip)
          while (start < end && is_ascii_space(text[start])) ++start;
      }
      if (start < end) out.push_back({-1, start, end - start});
    }
    if (changed) frags.swap(out);
  }
  return frags;
}

}  // namespace ns::tok
