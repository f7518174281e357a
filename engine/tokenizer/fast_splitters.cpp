#include "engine/tokenizer/fast_splitters.h"

#include <cstdio>

#include "engine/tokenizer/unicode_class.h"

namespace ns::tok {

const char* const kGpt2Pattern = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3Pattern =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kLlama3PatternCaseless =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

namespace {

struct CodepointRange {
  uint32_t first, last;
};

// llama.cpp's unicode_cpt_is_han, range for range.
constexpr CodepointRange kKimiHan[] = {
    {0x4E00, 0x9FFF},    // CJK Unified Ideographs
    {0x3400, 0x4DBF},    // Extension A
    {0x20000, 0x2A6DF},  // Extension B
    {0x2A700, 0x2B73F},  // Extension C
    {0x2B740, 0x2B81F},  // Extension D
    {0x2B820, 0x2CEAF},  // Extension E
    {0x2CEB0, 0x2EBEF},  // Extension F
    {0xF900, 0xFAFF},    // CJK Compatibility Ideographs
    {0x2F800, 0x2FA1F},  // CJK Compatibility Ideographs Supplement
};

constexpr uint32_t kKimiHanLowest = 0x3400;
constexpr bool all_from(uint32_t lowest) {
  for (const CodepointRange& r : kKimiHan)
    if (r.first < lowest) return false;
  return true;
}
static_assert(all_from(kKimiHanLowest));

}  // namespace

bool kimi_k2_is_han(uint32_t cpt) {
  if (cpt < kKimiHanLowest) return false;  // below every range: the common case
  for (const CodepointRange& r : kKimiHan)
    if (cpt >= r.first && cpt <= r.last) return true;
  return false;
}

const std::string& kimi_k2_pattern() {
  static const std::string pattern = [] {
    std::string han = "[";
    for (const CodepointRange& r : kKimiHan) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", r.first, r.last);
      han += buf;
    }
    han += "]";
    // The contractions spell out their case pairs: PCRE2's caseless UCP
    // matching would also take U+017F for s and U+212A for k, and llama.cpp's
    // lowercasing maps no non-ASCII code point onto a letter of "stmdrevl"
    // (its only non-ASCII-to-ASCII entries are U+0130 -> i and U+212A -> k).
    return han + "+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!" + han +
           ")\\p{L})+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}|"
           " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  }();
  return pattern;
}

namespace {

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

// The window [begin, end) of one piece; positions outside it read as "past the end".
class Window {
 public:
  Window(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths)
      : cpts_(cpts), begin_(begin), end_(end), prev_end_(begin), lengths_(lengths) {}
  uint32_t cpt(size_t pos) const { return pos >= begin_ && pos < end_ ? cpts_[pos] : kOutOfRange; }
  CharClass cls(size_t pos) const { return pos >= begin_ && pos < end_ ? char_class(cpts_[pos]) : CharClass{}; }
  size_t end() const { return end_; }
  // Ends the current piece at `end`; returns its length (0 pieces are dropped).
  size_t cut(size_t end) {
    const size_t len = end - prev_end_;
    if (len > 0) lengths_.push_back(static_cast<uint32_t>(len));
    prev_end_ = end;
    return len;
  }

 private:
  const std::vector<uint32_t>& cpts_;
  size_t begin_, end_, prev_end_;
  std::vector<uint32_t>& lengths_;
};

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of the contraction 's|'t|'re|'ve|'m|'ll|'d at pos (any ASCII case
// when any_case), or 0. Positions past the piece read as kOutOfRange, so a
// contraction never reaches over its end.
size_t contraction_at(const Window& w, size_t pos, bool any_case) {
  if (w.cpt(pos) != '\'') return 0;
  const auto fold = [&](uint32_t c) { return any_case ? ascii_lower(c) : c; };
  const uint32_t n1 = fold(w.cpt(pos + 1));
  if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
  const uint32_t n2 = fold(w.cpt(pos + 2));
  if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
  return 0;
}

bool is_other(const CharClass& f) { return !(f.whitespace || f.letter || f.number) && f.in_range; }

// The last alternatives of GPT-2's, Llama 3's and Kimi K2's patterns, for a
// run of n_ws whitespace characters at pos; cuts one piece and advances pos:
//   \s+(?!\S): a run followed by a non-space gives up its last character,
//     which then leads the next piece; at the end of the piece it keeps all;
//   \s+;
//   else (no alternative matched) a piece of one character.
void split_spaces(Window& w, size_t& pos, size_t n_ws) {
  if (n_ws > 1 && w.cpt(pos + n_ws) != kOutOfRange)
    pos += n_ws - 1;
  else if (n_ws > 0)
    pos += n_ws;
  else
    ++pos;
  w.cut(pos);
}

// The alternatives Llama 3 and Kimi K2 end with, at pos (a character the
// earlier alternatives did not take); cuts one or more pieces and advances pos:
//   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (or a single character if none matches). llama.cpp's Llama 3 function tests
// the current character's range in the second one and its Kimi K2 function
// the next one's; they differ only for a space that ends the piece, which
// both then cut alone.
void split_numbers_symbols_spaces(Window& w, size_t& pos) {
  const uint32_t c = w.cpt(pos);
  const CharClass f = w.cls(pos);

  // \p{N}{1,3}
  if (f.number) {
    size_t run_start = pos;
    while (w.cls(pos).number) {
      if (++pos - run_start >= 3) {
        w.cut(pos);
        run_start = pos;
      }
    }
    w.cut(pos);
    return;
  }

  // <space>?[^\s\p{L}\p{N}]+[\r\n]*
  CharClass f2 = c == ' ' ? w.cls(pos + 1) : f;
  if (!(f2.whitespace || f2.letter || f2.number) && f.in_range) {
    pos += c == ' ';
    while (is_other(f2)) f2 = w.cls(++pos);
    uint32_t c2 = w.cpt(pos);
    while (c2 == '\r' || c2 == '\n') c2 = w.cpt(++pos);
    w.cut(pos);
    return;
  }

  size_t n_ws = 0;
  size_t last_newline_end = 0;
  while (w.cls(pos + n_ws).whitespace) {
    const uint32_t c2 = w.cpt(pos + n_ws);
    if (c2 == '\r' || c2 == '\n') last_newline_end = pos + n_ws + 1;
    ++n_ws;
  }
  // \s*[\r\n]+ : through the last newline of the run
  if (last_newline_end > 0) {
    pos = last_newline_end;
    w.cut(pos);
    return;
  }
  split_spaces(w, pos, n_ws);
}

}  // namespace

void split_gpt2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths) {
  Window w(cpts, begin, end, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t c = w.cpt(pos);
    const CharClass f = w.cls(pos);

    // 's|'t|'re|'ve|'m|'ll|'d
    if (const size_t n = contraction_at(w, pos, false)) {
      pos += w.cut(pos + n);
      continue;
    }

    CharClass f2 = c == ' ' ? w.cls(pos + 1) : f;
    // <space>?\p{L}+
    if (f2.letter) {
      pos += c == ' ';
      while (f2.letter) f2 = w.cls(++pos);
      w.cut(pos);
      continue;
    }
    // <space>?\p{N}+
    if (f2.number) {
      pos += c == ' ';
      while (f2.number) f2 = w.cls(++pos);
      w.cut(pos);
      continue;
    }
    // <space>?[^\s\p{L}\p{N}]+
    if (is_other(f2)) {
      pos += c == ' ';
      while (is_other(f2)) f2 = w.cls(++pos);
      w.cut(pos);
      continue;
    }

    size_t n_ws = 0;
    while (w.cls(pos + n_ws).whitespace) ++n_ws;
    split_spaces(w, pos, n_ws);
  }
}

void split_llama3_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths) {
  Window w(cpts, begin, end, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t c = w.cpt(pos);
    const CharClass f = w.cls(pos);

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (const size_t n = contraction_at(w, pos, true)) {
      pos += w.cut(pos + n);
      continue;
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(c == '\r' || c == '\n' || f.number)) {
      if (f.letter || w.cls(pos + 1).letter) {
        ++pos;
        while (w.cls(pos).letter) ++pos;
        w.cut(pos);
        continue;
      }
    }

    split_numbers_symbols_spaces(w, pos);
  }
}

void split_kimi_k2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths) {
  Window w(cpts, begin, end, lengths);
  // A letter of a word: \p{L} but not Han (past the piece: neither).
  const auto word_letter = [&](size_t pos) { return w.cls(pos).letter && !kimi_k2_is_han(w.cpt(pos)); };
  for (size_t pos = begin; pos < end;) {
    const uint32_t c = w.cpt(pos);
    const CharClass f = w.cls(pos);

    // HAN+ (whether or not the code point is assigned, i.e. a letter)
    if (kimi_k2_is_han(c)) {
      while (kimi_k2_is_han(w.cpt(pos))) ++pos;
      w.cut(pos);
      continue;
    }

    // [^\r\n\p{L}\p{N}]?(?:(?!HAN)\p{L})+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    // (c is not Han here, so a letter c starts a word itself)
    const bool may_lead = !(c == '\r' || c == '\n' || f.letter || f.number);
    if (f.letter || (may_lead && word_letter(pos + 1))) {
      ++pos;
      while (word_letter(pos)) ++pos;
      pos += contraction_at(w, pos, true);
      w.cut(pos);
      continue;
    }

    split_numbers_symbols_spaces(w, pos);
  }
}

}  // namespace ns::tok
