#include "engine/tokenizer/fast_splitters.h"

#include "engine/tokenizer/unicode_class.h"

namespace ns::tok {

const char* const kGpt2Pattern = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3Pattern =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kLlama3PatternCaseless =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

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

bool is_other(const CharClass& f) { return !(f.whitespace || f.letter || f.number) && f.in_range; }

}  // namespace

void split_gpt2_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths) {
  Window w(cpts, begin, end, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t c = w.cpt(pos);
    const CharClass f = w.cls(pos);

    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == '\'' && pos + 1 < end) {
      const uint32_t n1 = w.cpt(pos + 1);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        pos += w.cut(pos + 2);
        continue;
      }
      if (pos + 2 < end) {
        const uint32_t n2 = w.cpt(pos + 2);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          pos += w.cut(pos + 3);
          continue;
        }
      }
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
    // \s+(?!\S): a run followed by a non-space gives up its last character,
    // which then leads the next piece; at the end of the piece it keeps all.
    if (n_ws > 1 && w.cpt(pos + n_ws) != kOutOfRange) {
      pos += n_ws - 1;
      w.cut(pos);
      continue;
    }
    if (n_ws > 0) {
      pos += n_ws;
      w.cut(pos);
      continue;
    }
    w.cut(++pos);  // no alternative matched: a piece of one character
  }
}

void split_llama3_fast(const std::vector<uint32_t>& cpts, size_t begin, size_t end, std::vector<uint32_t>& lengths) {
  Window w(cpts, begin, end, lengths);
  for (size_t pos = begin; pos < end;) {
    const uint32_t c = w.cpt(pos);
    const CharClass f = w.cls(pos);

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && pos + 1 < end) {
      const uint32_t n1 = ascii_lower(w.cpt(pos + 1));
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        pos += w.cut(pos + 2);
        continue;
      }
      if (pos + 2 < end) {
        const uint32_t n2 = ascii_lower(w.cpt(pos + 2));
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          pos += w.cut(pos + 3);
          continue;
        }
      }
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
      continue;
    }

    // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the current character's
    // range here, not the next one's; kept for identical results)
    CharClass f2 = c == ' ' ? w.cls(pos + 1) : f;
    if (!(f2.whitespace || f2.letter || f2.number) && f.in_range) {
      pos += c == ' ';
      while (is_other(f2)) f2 = w.cls(++pos);
      uint32_t c2 = w.cpt(pos);
      while (c2 == '\r' || c2 == '\n') c2 = w.cpt(++pos);
      w.cut(pos);
      continue;
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
      continue;
    }
    // \s+(?!\S)
    if (n_ws > 1 && w.cpt(pos + n_ws) != kOutOfRange) {
      pos += n_ws - 1;
      w.cut(pos);
      continue;
    }
    // \s+
    if (n_ws > 0) {
      pos += n_ws;
      w.cut(pos);
      continue;
    }
    w.cut(++pos);
  }
}

}  // namespace ns::tok
