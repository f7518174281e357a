// GBNF text -> Grammar (contract in engine/grammar/grammar.h).
#include <algorithm>
#include <map>
#include <optional>

#include "engine/grammar/grammar.h"
#include "engine/grammar/utf8_ranges.h"
#include "common/error.h"

namespace ns::grammar {

uint64_t text_hash(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

using Elem = Grammar::Elem;
using Kind = Grammar::Kind;
using Seq = std::vector<Elem>;

constexpr int kMaxRepeat = 10000;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Grammar run() {
    skip_space(true);
    while (!eof()) {
      parse_rule();
      skip_space(true);
    }
    return finish();
  }

 private:
  struct Rule {
    std::string name;
    std::vector<Seq> alts;
    bool defined = false;
    size_t first_use = 0;  // source offset of the first reference, for "never defined"
  };

  bool eof() const { return pos_ >= src_.size(); }
  char peek() const { return eof() ? '\0' : src_[pos_]; }

  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(ErrorKind::invalid_input,
                "grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  void skip_space(bool newlines) {
    while (!eof()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && src_[pos_] != '\n') ++pos_;
      } else if ((c == '\n' || c == '\r') && newlines) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(src_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t used_at) {
    const auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) rules_.push_back({name, {}, false, used_at});
    return it->second;
  }

  uint32_t helper_rule(uint32_t parent) {
    const std::string name = rules_[parent].name + "_" + std::to_string(rules_.size());
    const uint32_t id = rule_id(name, pos_);
    rules_[id].defined = true;
    return id;
  }

  uint32_t set_id(const ByteSet& s) {
    const auto [it, inserted] = set_ids_.emplace(s.bits, static_cast<uint32_t>(sets_.size()));
    if (inserted) sets_.push_back(s);
    return it->second;
  }

  Elem byte_elem(uint8_t b) {
    ByteSet s;
    s.add(b);
    return {Kind::bytes, set_id(s)};
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected ::= after the rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, start);
    if (rules_[id].defined) fail_at(start, "rule '" + name + "' is defined twice");
    rules_[id].defined = true;
    std::vector<Seq> alts = parse_alternates(id, false);
    rules_[id].alts = std::move(alts);
    skip_space(false);
    if (!eof() && peek() != '\n' && peek() != '\r') fail(std::string("unexpected '") + peek() + "'");
  }

  std::vector<Seq> parse_alternates(uint32_t rule, bool nested) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(rule, nested));
    for (;;) {
      if (peek() == '|') {
        ++pos_;
        skip_space(true);
        alts.push_back(parse_sequence(rule, nested));
        continue;
      }
      if (nested) break;
      // A top-level alternation may go on on the next line when that line starts with '|'.
      const size_t save = pos_;
      skip_space(true);
      if (peek() == '|') continue;
      pos_ = save;
      break;
    }
    return alts;
  }

  Seq parse_sequence(uint32_t rule, bool nested) {
    Seq seq, item;
    bool have_item = false;
    for (;;) {
      const char c = peek();
      if (c == '"' || c == '[' || c == '.' || c == '(' || is_name_char(c)) {
        seq.insert(seq.end(), item.begin(), item.end());
        item.clear();
        have_item = true;
        if (c == '"') {
          item = parse_literal();
        } else if (c == '[') {
          item = {parse_class(rule)};
        } else if (c == '.') {
          ++pos_;
          item = {class_elem(rule, {{0, kMaxCodepoint}})};
        } else if (c == '(') {
          ++pos_;
          skip_space(true);
          const uint32_t group = helper_rule(rule);
          std::vector<Seq> alts = parse_alternates(group, true);
          rules_[group].alts = std::move(alts);
          skip_space(true);
          if (peek() != ')') fail("expected ')' to close the group");
          ++pos_;
          item = {{Kind::ref, group}};
        } else {
          const size_t at = pos_;
          item = {{Kind::ref, rule_id(parse_name(), at)}};
        }
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) fail(std::string("'") + c + "' has nothing before it to repeat");
        int min = 0, max = -1;
        if (c == '*') {
          ++pos_;
        } else if (c == '+') {
          ++pos_;
          min = 1;
        } else if (c == '?') {
          ++pos_;
          max = 1;
        } else {
          parse_braces(&min, &max);
        }
        item = repeat(rule, std::move(item), min, max);
      } else {
        break;
      }
      skip_space(nested);
    }
    seq.insert(seq.end(), item.begin(), item.end());
    return seq;
  }

  int parse_int() {
    const size_t start = pos_;
    int64_t v = 0;
    while (!eof() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = v * 10 + (src_[pos_++] - '0');
      if (v > kMaxRepeat) fail_at(start, "repetition count above " + std::to_string(kMaxRepeat));
    }
    if (pos_ == start) fail("expected a number");
    return static_cast<int>(v);
  }

  void parse_braces(int* min, int* max) {
    ++pos_;  // '{'
    skip_space(false);
    *min = parse_int();
    skip_space(false);
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      *max = peek() == '}' ? -1 : parse_int();
      skip_space(false);
    } else {
      *max = *min;
    }
    if (peek() != '}') fail("expected '}' to close the repetition");
    ++pos_;
    if (*max >= 0 && *max < *min) fail("repetition {m,n} with n < m");
  }

  // x{min,max} (max -1 = unbounded) as elements of the enclosing sequence.
  Seq repeat(uint32_t rule, Seq item, int min, int max) {
    if (item.size() != 1) {
      const uint32_t h = helper_rule(rule);
      rules_[h].alts = {std::move(item)};
      item = {{Kind::ref, h}};
    }
    const Elem x = item[0];
    Seq out(static_cast<size_t>(min), x);
    if (max < 0) {
      const uint32_t r = helper_rule(rule);  // r ::= x r | ε
      rules_[r].alts = {{x, {Kind::ref, r}}, {}};
      out.push_back({Kind::ref, r});
    } else if (max > min) {
      // r1 ::= x r2 | ε, ..., rk ::= x | ε: at most max - min more.
      std::optional<uint32_t> next;
      for (int k = 0; k < max - min; ++k) {
        const uint32_t r = helper_rule(rule);
        Seq alt = {x};
        if (next) alt.push_back({Kind::ref, *next});
        rules_[r].alts = {std::move(alt), {}};
        next = r;
      }
      out.push_back({Kind::ref, *next});
    }
    return out;
  }

  int hex_digits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        fail("expected " + std::to_string(n) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return static_cast<int>(v);
  }

  // One character of a literal or class: an escape or a UTF-8 character of the source.
  uint32_t parse_char() {
    if (eof()) fail("unexpected end of the grammar");
    const char c = src_[pos_];
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '/':
        case '^': return static_cast<uint8_t>(e);
        case 'x': return static_cast<uint32_t>(hex_digits(2));
        case 'u': return checked_codepoint(static_cast<uint32_t>(hex_digits(4)));
        case 'U': return checked_codepoint(static_cast<uint32_t>(hex_digits(8)));
        default: fail_at(pos_ - 2, std::string("unknown escape \\") + e);
      }
    }
    uint32_t cp = 0;
    const size_t n = decode_utf8(src_.substr(pos_), &cp);
    if (n == 0) fail("the grammar text is not valid UTF-8 here");
    pos_ += n;
    return cp;
  }

  uint32_t checked_codepoint(uint32_t cp) {
    if (cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("escape names no Unicode character");
    return cp;
  }

  Seq parse_literal() {
    ++pos_;  // '"'
    Seq out;
    while (peek() != '"') {
      if (eof() || peek() == '\n') fail("unterminated string literal");
      for (const uint8_t b : encode_utf8(parse_char())) out.push_back(byte_elem(b));
    }
    ++pos_;
    return out;
  }

  Elem parse_class(uint32_t rule) {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (peek() != ']') {
      if (eof() || peek() == '\n') fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range is backwards");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    ranges = normalize(std::move(ranges));
    if (negated) ranges = complement(ranges);
    if (ranges.empty()) fail("the character class matches no character");
    return class_elem(rule, ranges);
  }

  // A class as one byte-set element (ASCII only) or a helper rule of UTF-8 byte sequences,
  // shared by every identical class.
  Elem class_elem(uint32_t rule, const std::vector<CodepointRange>& ranges) {
    const std::vector<Utf8Sequence> seqs = utf8_sequences(ranges);
    ByteSet single;
    bool any_single = false, any_multi = false;
    for (const Utf8Sequence& s : seqs) {
      if (s.size() == 1) {
        single.add_range(s[0].lo, s[0].hi);
        any_single = true;
      } else {
        any_multi = true;
      }
    }
    if (!any_multi) return {Kind::bytes, set_id(single)};
    std::string key;
    for (const CodepointRange& r : ranges) key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
    if (const auto it = class_rules_.find(key); it != class_rules_.end()) return {Kind::ref, it->second};
    const uint32_t h = helper_rule(rule);
    std::vector<Seq> alts;
    if (any_single) alts.push_back({{Kind::bytes, set_id(single)}});
    for (const Utf8Sequence& s : seqs) {
      if (s.size() == 1) continue;
      Seq alt;
      for (const ByteRange& br : s) {
        ByteSet bs;
        bs.add_range(br.lo, br.hi);
        alt.push_back({Kind::bytes, set_id(bs)});
      }
      alts.push_back(std::move(alt));
    }
    rules_[h].alts = std::move(alts);
    class_rules_.emplace(key, h);
    return {Kind::ref, h};
  }

  Grammar finish() {
    for (const Rule& r : rules_)
      if (!r.defined) fail_at(r.first_use, "rule '" + r.name + "' is used but never defined");
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw Error(ErrorKind::invalid_input, "the grammar has no rule named 'root'");
    Grammar g;
    g.root = root->second;
    g.sets = std::move(sets_);
    g.rules.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      g.rule_names.push_back(rules_[r].name);
      for (const Seq& alt : rules_[r].alts) {
        g.rules[r].push_back(static_cast<uint32_t>(g.elems.size()));
        g.elems.insert(g.elems.end(), alt.begin(), alt.end());
        g.elems.push_back({Kind::end, 0});
      }
    }
    check_left_recursion(g);
    g.source = std::string(src_);
    g.hash = text_hash(src_);
    return g;
  }

  // A rule that can reach itself without consuming a byte would expand forever.
  static void check_left_recursion(const Grammar& g) {
    const size_t n = g.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const uint32_t start : g.rules[r]) {
          bool all = true;
          for (uint32_t p = start; g.elems[p].kind != Kind::end; ++p)
            if (g.elems[p].kind == Kind::bytes || !nullable[g.elems[p].arg]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r)
      for (const uint32_t start : g.rules[r])
        for (uint32_t p = start; g.elems[p].kind == Kind::ref; ++p) {
          left[r].push_back(g.elems[p].arg);
          if (!nullable[g.elems[p].arg]) break;
        }
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      path.push_back({s, 0});
      color[s] = 1;
      while (!path.empty()) {
        auto& [r, i] = path.back();
        if (i == left[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = left[r][i++];
        if (color[next] == 1)
          throw Error(ErrorKind::invalid_input,
                      "grammar rule '" + g.rule_names[next] +
                          "' is left-recursive (it can reach itself without matching a character, e.g. a "
                          "repetition of something that may be empty): rewrite it right-recursively");
        if (color[next] == 0) {
          color[next] = 1;
          path.push_back({next, 0});
        }
      }
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<Rule> rules_;
  std::map<std::string, uint32_t> ids_;
  std::vector<ByteSet> sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
  std::map<std::string, uint32_t> class_rules_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw Error(ErrorKind::invalid_input, "the grammar is empty: give at least `root ::= ...`");
  return Parser(text).run();
}

}  // namespace ns::grammar
