// The Jinja lexer: template source to tokens, with jinja2's whitespace rules
// applied to the text between tags ({%- -%} {{- -}} {#- -#}, trim_blocks,
// lstrip_blocks, the single trailing newline jinja2 drops, \r\n as \n).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ns::chat::jinja {

enum class Tok { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
  Tok type;
  std::string text;  // text, name, string value, operator
  int64_t i = 0;
  double f = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws ns::Error(invalid_input) on an unterminated tag or string.
std::vector<Token> tokenize(const std::string& source, const LexOptions& opts);

}  // namespace ns::chat::jinja
