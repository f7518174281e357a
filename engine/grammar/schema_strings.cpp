// GBNF for pattern, format and integer bounds (contract in engine/grammar/schema_strings.h).
#include "engine/grammar/schema_strings.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "common/utf8.h"

namespace ns::grammar {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr int kMaxRepeat = 10000;  // the GBNF parser's repetition limit

// A set of code points: sorted, disjoint, non-adjacent ranges.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

// Every code point but the surrogates (which are not characters) and those in r.
Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalized(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
  Ranges no_surrogates;
  for (const auto& [lo, hi] : out) {
    if (hi < 0xD800 || lo > 0xDFFF)
      no_surrogates.emplace_back(lo, hi);
    else {
      if (lo < 0xD800) no_surrogates.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) no_surrogates.emplace_back(0xE000, hi);
    }
  }
  return no_surrogates;
}

Ranges minus(const Ranges& a, const Ranges& b) {
  Ranges both = complement(b);
  Ranges out;
  for (const auto& [alo, ahi] : normalized(a))
    for (const auto& [blo, bhi] : both) {
      const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalized(out);
}

bool contains(const Ranges& r, uint32_t c) {
  for (const auto& [lo, hi] : r)
    if (c >= lo && c <= hi) return true;
  return false;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = normalized({{'\t', '\r'},
                                  {' ', ' '},
                                  {0xA0, 0xA0},
                                  {0x1680, 0x1680},
                                  {0x2000, 0x200A},
                                  {0x2028, 0x2029},
                                  {0x202F, 0x202F},
                                  {0x205F, 0x205F},
                                  {0x3000, 0x3000},
                                  {0xFEFF, 0xFEFF}});
const Ranges kDot = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
// Characters JSON writes escaped inside a string.
const Ranges kJsonSpecial = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}};

std::string hex(uint32_t v, int digits) {
  static const char* kHex = "0123456789ABCDEF";
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15];
  return s;
}

// A GBNF string literal of plain (already JSON-encoded) text.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (b < 0x20 || b == 0x7F)
      out += "\\x" + hex(b, 2);
    else
      out += c;
  }
  return out + "\"";
}

std::string class_char(uint32_t c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return std::string(1, char(c));
  if (c < 0x80) return "\\x" + hex(c, 2);
  return "\\U" + hex(c, 8);
}

// How JSON writes a control character, a quote or a backslash inside a string.
std::string json_escape(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: {
      std::string h = hex(c, 4);
      std::transform(h.begin(), h.end(), h.begin(), [](char x) { return char(std::tolower(x)); });
      return "\\u" + h;
    }
  }
}

class PatternCompiler {
 public:
  explicit PatternCompiler(std::string_view text) {
    // Decode UTF-8 to code points, remembering each one's byte offset for messages.
    for (size_t i = 0; i < text.size();) {
      const auto b = static_cast<unsigned char>(text[i]);
      const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (n == 0 || i + static_cast<size_t>(n) > text.size()) throw PatternError("the pattern is not valid UTF-8");
      uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
      for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + static_cast<size_t>(k)]) & 0x3F);
      p_.push_back(c);
      at_.push_back(i);
      i += static_cast<size_t>(n);
    }
    at_.push_back(text.size());
  }

  std::string run() {
    size_t end = p_.size();
    const bool start_anchor = !p_.empty() && p_[0] == '^';
    bool end_anchor = false;
    if (end > (start_anchor ? 1u : 0u) && p_[end - 1] == '$') {
      size_t slashes = 0;  // an escaped \$ is a literal
      while (slashes + 1 < end && p_[end - 2 - slashes] == '\\') ++slashes;
      end_anchor = slashes % 2 == 0;
    }
    i_ = start_anchor ? 1 : 0;
    end_ = end_anchor ? end - 1 : end;
    const std::string body = alternation();
    if (i_ < end_) fail(p_[i_] == ')' ? "an unmatched \")\"" : "an unexpected character");
    static const std::string kAnyChars = R"(([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))*)";
    std::string out = R"("\"")";
    if (!start_anchor) out += " " + kAnyChars;
    if (!body.empty()) out += " (" + body + ")";
    if (!end_anchor) out += " " + kAnyChars;
    return out + R"( "\"")";
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PatternError(what + " at offset " + std::to_string(at_[std::min(i_, at_.size() - 1)]));
  }
  bool more() const { return i_ < end_; }
  uint32_t peek() const { return p_[i_]; }

  std::string alternation() {
    std::vector<std::string> alts{sequence()};
    while (more() && peek() == '|') {
      ++i_;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return alts[0];
    std::string out;
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + (alts[k].empty() ? "\"\"" : alts[k]);
    return out;
  }

  std::string sequence() {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      std::string item = atom();
      item = quantified("(" + item + ")");
      out += (out.empty() ? "" : " ") + item;
    }
    return out;
  }

  std::string quantified(const std::string& item) {
    if (!more()) return item;
    const uint32_t c = peek();
    std::string out;
    if (c == '?' || c == '*' || c == '+') {
      ++i_;
      out = item + static_cast<char>(c);
    } else if (c == '{') {
      const size_t start = i_;
      ++i_;
      const long min = number();
      long max = min;
      if (more() && peek() == ',') {
        ++i_;
        max = more() && peek() != '}' ? number() : -1;
      }
      if (!more() || peek() != '}') {
        i_ = start;
        fail("a \"{\" that does not start a quantifier {m}, {m,} or {m,n} (write \\{ for the character)");
      }
      ++i_;
      if (max >= 0 && max < min) fail("a quantifier whose maximum is below its minimum");
      out = item + "{" + std::to_string(min) + (max == min ? "" : "," + (max < 0 ? "" : std::to_string(max))) + "}";
    } else {
      return item;
    }
    if (more() && peek() == '?') ++i_;  // lazy: the same strings match
    if (more() && (peek() == '?' || peek() == '*' || peek() == '+' || peek() == '{'))
      fail("a quantifier after a quantifier");
    return out;
  }

  long number() {
    if (!more() || peek() < '0' || peek() > '9') fail("a quantifier without a number");
    long v = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<long>(peek() - '0');
      if (v > kMaxRepeat) fail("a repetition count above " + std::to_string(kMaxRepeat));
      ++i_;
    }
    return v;
  }

  std::string atom() {
    const uint32_t c = peek();
    switch (c) {
      case '(': return group();
      case '[': return set_gbnf(char_class());
      case '.': ++i_; return set_gbnf(kDot);
      case '\\': return escape_outside();
      case '^': fail("\"^\" is supported only at the start of the pattern");
      case '$': fail("\"$\" is supported only at the end of the pattern");
      case '*':
      case '+':
      case '?': fail("a quantifier with nothing before it to repeat");
      case '{': fail("a \"{\" with nothing before it to repeat (write \\{ for the character)");
      case ']':
      case '}': ++i_; return set_gbnf({{c, c}});
      default: ++i_; return set_gbnf({{c, c}});
    }
  }

  std::string group() {
    ++i_;
    if (more() && peek() == '?') {
      ++i_;
      const uint32_t k = more() ? peek() : 0;
      if (k == ':') {
        ++i_;
      } else if (k == '=' || k == '!') {
        fail("a lookahead (?" + std::string(1, char(k)) + "...)");
      } else if (k == '<' && i_ + 1 < end_ && (p_[i_ + 1] == '=' || p_[i_ + 1] == '!')) {
        fail("a lookbehind (?<" + std::string(1, char(p_[i_ + 1])) + "...)");
      } else if (k == '<') {  // a named group: its name does not change what matches
        while (more() && peek() != '>') ++i_;
        if (!more()) fail("an unterminated group name");
        ++i_;
      } else {
        fail("an unsupported group \"(?\"");
      }
    }
    std::string body = alternation();
    if (!more() || peek() != ')') fail("a \"(\" without its \")\"");
    ++i_;
    return body.empty() ? "\"\"" : body;
  }

  // Whether escape letter e stands for a set (\d \w \s and their negations); the set in out.
  bool class_escape(uint32_t e, Ranges& out) const {
    switch (e) {
      case 'd': out = kDigit; return true;
      case 'D': out = complement(kDigit); return true;
      case 'w': out = kWord; return true;
      case 'W': out = complement(kWord); return true;
      case 's': out = kSpace; return true;
      case 'S': out = complement(kSpace); return true;
      default: return false;
    }
  }

  // The character an escape stands for (\ already consumed, i_ at the letter).
  uint32_t escaped_char(bool in_class) {
    const uint32_t e = peek();
    ++i_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0':
        if (more() && peek() >= '0' && peek() <= '9') fail("an octal escape");
        return 0;
      case 'x': return hex_digits(2);
      case 'u':
        if (more() && peek() == '{') fail("a \\u{...} escape (write \\uHHHH)");
        return hex_digits(4);
      case 'b':
        if (in_class) return '\b';
        --i_;
        fail("a word boundary \\b");
      case 'B': --i_; fail("a word boundary \\B");
      case 'k': --i_; fail("a backreference \\k<name>");
      case 'p':
      case 'P': --i_; fail("a Unicode property escape \\" + std::string(1, char(e)));
      case 'c': --i_; fail("a control escape \\c");
      default:
        if (e >= '1' && e <= '9') {
          --i_;
          fail("a backreference \\" + std::string(1, char(e)));
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          --i_;
          fail("an unknown escape \\" + std::string(1, char(e)));
        }
        return e;  // escaped punctuation stands for itself
    }
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (!more()) fail("a short hex escape");
      const uint32_t h = peek();
      const int d = h >= '0' && h <= '9'   ? int(h - '0')
                    : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                    : h >= 'A' && h <= 'F' ? int(h - 'A' + 10)
                                           : -1;
      if (d < 0) fail("a bad hex digit in an escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    if (v >= 0xD800 && v <= 0xDFFF) fail("a surrogate code point in an escape");
    return v;
  }

  std::string escape_outside() {
    ++i_;
    if (!more()) fail("a \"\\\" at the end");
    Ranges set;
    if (class_escape(peek(), set)) {
      ++i_;
      return set_gbnf(set);
    }
    const uint32_t c = escaped_char(false);
    return set_gbnf({{c, c}});
  }

  Ranges char_class() {
    ++i_;  // [
    bool negated = false;
    if (more() && peek() == '^') {
      negated = true;
      ++i_;
    }
    Ranges set;
    while (true) {
      if (!more()) fail("a \"[\" without its \"]\"");
      if (peek() == ']') {
        ++i_;
        break;
      }
      // One item: a character, or a set escape; then maybe "-" and a character.
      Ranges esc_set;
      uint32_t lo;
      if (peek() == '\\') {
        ++i_;
        if (!more()) fail("a \"\\\" at the end");
        if (class_escape(peek(), esc_set)) {
          ++i_;
          set.insert(set.end(), esc_set.begin(), esc_set.end());
          continue;
        }
        lo = escaped_char(true);
      } else {
        lo = peek();
        ++i_;
      }
      if (more() && peek() == '-' && i_ + 1 < end_ && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (peek() == '\\') {
          ++i_;
          if (!more()) fail("a \"\\\" at the end");
          if (class_escape(peek(), esc_set)) fail("a range ending in a class escape");
          hi = escaped_char(true);
        } else {
          hi = peek();
          ++i_;
        }
        if (hi < lo) fail("a class range out of order");
        set.emplace_back(lo, hi);
      } else {
        set.emplace_back(lo, lo);
      }
    }
    set = normalized(set);
    return negated ? complement(set) : set;
  }

  // The JSON text of one character of `set`: plain characters in a class, the others escaped as JSON writes them.
  std::string set_gbnf(const Ranges& in) {
    const Ranges set = normalized(in);
    std::vector<std::string> alts;
    const Ranges plain = minus(set, kJsonSpecial);
    if (plain.size() == 1 && plain[0].first == plain[0].second) {
      alts.push_back(literal(encode_utf8(plain[0].first)));
    } else if (!plain.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : plain) cls += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
      alts.push_back(cls + "]");
    }
    if (contains(set, '"')) alts.push_back(literal("\\\""));
    if (contains(set, '\\')) alts.push_back(literal("\\\\"));
    bool all_controls = true;
    for (uint32_t c = 0; c < 0x20; ++c) all_controls = all_controls && contains(set, c);
    if (all_controls) {
      alts.push_back(R"("\\" [bfnrt])");
      alts.push_back(R"("\\u00" [01] [0-9a-f])");
    } else {
      for (uint32_t c = 0; c < 0x20; ++c)
        if (contains(set, c)) alts.push_back(literal(json_escape(c)));
    }
    if (alts.empty()) fail("a class that matches no character");
    if (alts.size() == 1) return alts[0];
    std::string out;
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out;
  }

  std::vector<uint32_t> p_;
  std::vector<size_t> at_;  // byte offset of each code point, and the end
  size_t i_ = 0, end_ = 0;
};

// Digit strings of one length, x <= y: the GBNF for every string from x to y.
std::string same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  const auto cat = [](const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; };
  const auto digit = [](char a, char b) {
    return a == b ? std::string("\"") + a + "\"" : std::string("[") + a + "-" + b + "]";
  };
  const size_t n = x.size() - 1;
  const std::string any = n == 0 ? "" : n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
  if (x[0] == y[0]) return cat(digit(x[0], x[0]), same_length(x.substr(1), y.substr(1)));
  const bool x_low = x.find_first_not_of('0', 1) == std::string::npos;
  const bool y_high = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(x[0] + 1), mid_hi = static_cast<char>(y[0] - 1);
  if (x_low)
    mid_lo = x[0];
  else
    alts.push_back(cat(digit(x[0], x[0]), same_length(x.substr(1), std::string(n, '9'))));
  if (y_high) mid_hi = y[0];
  if (mid_lo <= mid_hi) alts.push_back(cat(digit(mid_lo, mid_hi), any));
  if (!y_high) alts.push_back(cat(digit(y[0], y[0]), same_length(std::string(n, '0'), y.substr(1))));
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
  return out + ")";
}

// 0 <= lo <= hi.
std::string non_negative(int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  std::vector<std::string> alts;
  int64_t power = 1;  // 10^(length - 1)
  for (size_t len = 1; len <= b.size(); ++len, power *= 10) {
    if (len < a.size()) continue;
    const int64_t from = len == a.size() ? lo : power;
    const int64_t to = len == b.size() ? hi : power * 10 - 1;
    alts.push_back(same_length(std::to_string(from), std::to_string(to)));
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
  return out + ")";
}

}  // namespace

std::string pattern_gbnf(std::string_view pattern) { return PatternCompiler(pattern).run(); }

std::string format_gbnf(std::string_view format) {
  const std::string date = R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))";
  const std::string time = R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})? )"
                           R"(("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
  std::string body;
  if (format == "date")
    body = date;
  else if (format == "time")
    body = time;
  else if (format == "date-time")
    body = date + " \"T\" " + time;
  else if (format == "uuid")
    body = R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
  else if (format == "email")
    body = R"([A-Za-z0-9_%+-]+ ("." [A-Za-z0-9_%+-]+)* "@" )"
           R"(([A-Za-z0-9] ([A-Za-z0-9-]* [A-Za-z0-9])? ".")+ [A-Za-z]{2,63})";
  else
    return "";
  return "\"\\\"\" " + body + " \"\\\"\"";
}

std::string int_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + non_negative(hi < 0 ? -hi : 1, -lo));
  if (hi >= 0) alts.push_back(non_negative(std::max<int64_t>(lo, 0), hi));
  if (alts.size() == 1) return alts[0];
  return "(" + alts[0] + " | " + alts[1] + ")";
}

}  // namespace ns::grammar
