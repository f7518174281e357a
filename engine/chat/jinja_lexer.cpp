// Jinja lexer (see jinja_lexer.h).
#include "engine/chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/chat/jinja_value.h"
#include "common/utf8.h"

namespace ns::chat::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  // jinja2 (keep_trailing_newline=False) drops one final newline.
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void rstrip(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

class Lexer {
 public:
  Lexer(const std::string& src, const LexOptions& o) : s_(normalize_newlines(src)), o_(o) {}

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < s_.size()) {
      size_t tag = find_tag(pos);
      std::string text = s_.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
      if (tag == std::string::npos) {
        emit_text(text, pos);
        break;
      }
      const char kind = s_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < s_.size() ? s_[tag + 2] : 0;
      if (sign == '-') {
        rstrip(text);
      } else if (sign != '+' && o_.lstrip_blocks && kind != '{') {
        lstrip_line(text, pos);
      }
      count_lines(pos, tag);
      emit_text(text, pos);
      size_t p = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        pos = end_comment(p);
      } else if (kind == '%' && is_raw(p)) {
        pos = raw_block(p);
      } else {
        pos = tag_tokens(p, kind == '{');
      }
    }
    push(Tok::eof, "");
    return std::move(toks_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t k = s_.find('{', from); k != std::string::npos; k = s_.find('{', k + 1)) {
      if (k + 1 < s_.size() && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  // lstrip_blocks: spaces and tabs between the line's start and a block tag go.
  void lstrip_line(std::string& text, size_t text_start) const {
    size_t nl = text.rfind('\n');
    size_t l = nl == std::string::npos ? 0 : nl + 1;
    bool line_start = l > 0 || text_start == 0 || s_[text_start - 1] == '\n';
    if (!line_start || l == text.size()) return;
    for (size_t k = l; k < text.size(); ++k)
      if (!is_space(text[k])) return;
    text.resize(l);
  }

  void emit_text(const std::string& text, size_t) {
    if (!text.empty()) push(Tok::text, text);
  }

  void push(Tok t, std::string text) {
    Token tok{t, std::move(text)};
    tok.line = line_;
    toks_.push_back(std::move(tok));
  }

  // After a closing delimiter at `p` (just past it): '-' swallowed all
  // whitespace, trim_blocks one newline.
  size_t after_close(size_t p, bool minus, bool plus, bool trim) {
    if (minus) {
      while (p < s_.size() && is_space(s_[p])) ++p;
    } else if (!plus && trim && o_.trim_blocks && p < s_.size() && s_[p] == '\n') {
      ++p;
    }
    return p;
  }

  size_t end_comment(size_t p) {
    size_t e = s_.find("#}", p);
    if (e == std::string::npos) fail("TemplateSyntaxError: missing end of comment tag");
    count_lines(p, e);
    bool minus = e > p && s_[e - 1] == '-';
    bool plus = e > p && s_[e - 1] == '+';
    return after_close(e + 2, minus, plus, true);
  }

  void count_lines(size_t a, size_t b) {
    for (size_t k = a; k < b && k < s_.size(); ++k)
      if (s_[k] == '\n') ++line_;
  }

  size_t skip_ws(size_t p) const {
    while (p < s_.size() && is_space(s_[p])) ++p;
    return p;
  }

  bool word_at(size_t p, const char* w) const {
    size_t n = std::strlen(w);
    if (s_.compare(p, n, w) != 0) return false;
    return p + n >= s_.size() || !(std::isalnum(static_cast<unsigned char>(s_[p + n])) || s_[p + n] == '_');
  }

  bool is_raw(size_t p) const { return word_at(skip_ws(p), "raw"); }

  size_t raw_block(size_t p) {
    p = skip_ws(p) + 3;
    p = skip_ws(p);
    bool minus = false;
    if (p < s_.size() && s_[p] == '-') minus = true, ++p;
    if (s_.compare(p, 2, "%}") != 0) fail("TemplateSyntaxError: expected '%}' after raw");
    p = after_close(p + 2, minus, false, false);  // no trim_blocks after {% raw %} (jinja2)
    // Find {% endraw %}.
    for (size_t k = s_.find("{%", p); k != std::string::npos; k = s_.find("{%", k + 1)) {
      size_t q = k + 2;
      char sign = q < s_.size() ? s_[q] : 0;
      if (sign == '-' || sign == '+') ++q;
      q = skip_ws(q);
      if (!word_at(q, "endraw")) continue;
      q = skip_ws(q + 6);
      bool m2 = false, p2 = false;
      if (q < s_.size() && s_[q] == '-')
        m2 = true, ++q;
      else if (q < s_.size() && s_[q] == '+')
        p2 = true, ++q;
      if (s_.compare(q, 2, "%}") != 0) continue;
      std::string text = s_.substr(p, k - p);
      if (sign == '-')
        rstrip(text);
      else if (sign != '+' && o_.lstrip_blocks)
        lstrip_line(text, p);
      count_lines(p, k);
      emit_text(text, p);
      return after_close(q + 2, m2, p2, true);
    }
    fail("TemplateSyntaxError: missing endraw");
  }

  size_t tag_tokens(size_t p, bool is_var) {
    push(is_var ? Tok::var_begin : Tok::block_begin, "");
    const char close = is_var ? '}' : '%';
    int depth = 0;  // brackets: "}}" inside a dict literal is not the end
    while (true) {
      while (p < s_.size() && is_space(s_[p])) {
        if (s_[p] == '\n') ++line_;
        ++p;
      }
      if (p >= s_.size())
        fail(std::string("TemplateSyntaxError: unexpected end of template, expected '") + close + "}'");
      char c = s_[p];
      if (depth == 0) {
        bool minus =
            c == '-' && s_.compare(p + 1, 1, std::string(1, close)) == 0 && p + 2 < s_.size() && s_[p + 2] == '}';
        bool plus =
            c == '+' && s_.compare(p + 1, 1, std::string(1, close)) == 0 && p + 2 < s_.size() && s_[p + 2] == '}';
        if (minus || plus || (c == close && p + 1 < s_.size() && s_[p + 1] == '}')) {
          size_t end = p + (minus || plus ? 3 : 2);
          push(is_var ? Tok::var_end : Tok::block_end, "");
          return after_close(end, minus, plus, !is_var);
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t b = p;
        while (p < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) ++p;
        push(Tok::name, s_.substr(b, p - b));
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = number(p);
      } else if (c == '\'' || c == '"') {
        p = string_literal(p);
      } else {
        static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* o : ops2)
          if (s_.compare(p, 2, o) == 0) op = o;
        if (op.empty()) {
          if (!std::strchr("+-*/%~<>=()[]{}.,:|", c))
            fail(std::string("TemplateSyntaxError: unexpected char '") + c + "'");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        push(Tok::op, op);
        p += op.size();
      }
    }
  }

  size_t number(size_t p) {
    size_t b = p;
    while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) ++p;
    bool is_float = false;
    if (p + 1 < s_.size() && s_[p] == '.' && std::isdigit(static_cast<unsigned char>(s_[p + 1]))) {
      is_float = true;
      ++p;
      while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) ++p;
    }
    if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      size_t q = p + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
        is_float = true;
        p = q;
        while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
      }
    }
    std::string digits;
    for (size_t k = b; k < p; ++k)
      if (s_[k] != '_') digits += s_[k];
    Token t{is_float ? Tok::floating : Tok::integer, digits};
    t.line = line_;
    if (is_float) {
      t.f = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      t.i = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("TemplateSyntaxError: integer literal too large: " + digits);
    }
    toks_.push_back(std::move(t));
    return p;
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  size_t string_literal(size_t p) {
    const char q = s_[p++];
    std::string out;
    while (true) {
      if (p >= s_.size()) fail("TemplateSyntaxError: unexpected end of string");
      char c = s_[p];
      if (c == q) break;
      if (c == '\n') ++line_;
      if (c != '\\' || p + 1 >= s_.size()) {
        out += c;
        ++p;
        continue;
      }
      char e = s_[p + 1];
      p += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          bool ok = p + n <= s_.size();
          for (size_t k = 0; ok && k < n; ++k) {
            int h = hex(s_[p + k]);
            if (h < 0)
              ok = false;
            else
              cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (!ok) fail("TemplateSyntaxError: truncated \\" + std::string(1, e) + " escape");
          out += encode_utf8(cp);
          p += n;
          break;
        }
        default:
          out += '\\';
          out += e;
          break;
      }
    }
    push(Tok::string, out);
    return p + 1;
  }

  std::string s_;
  LexOptions o_;
  std::vector<Token> toks_;
  int line_ = 1;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& opts) { return Lexer(source, opts).run(); }

}  // namespace ns::chat::jinja
