// GBNF for the string and integer constraints of JSON Schema (engine/grammar/json_schema.h uses them):
// `pattern`, `format`, and integer bounds.
//
// pattern_gbnf(): a regular expression (ECMA-262 syntax, the subset below) -> a GBNF expression for the whole
// JSON string, quotes included, whose decoded value the pattern matches. Supported: literal characters, `.`,
// classes [a-z] [^...] (with ranges and the escapes below inside), escapes \d \w \s \D \W \S, escaped
// punctuation (\. \\ \/ \( ...), \n \r \t \f \v \xHH \uHHHH, groups ( ), (?: ) and (?<name> ), alternation |,
// quantifiers ? * + {m} {m,} {m,n} (a lazy `?` after one is accepted: it does not change what matches), ^ only at
// the start and $ only at the end. As JSON Schema says, a pattern without ^ (or $) matches anywhere: any
// characters may come before (after) it. The grammar writes a character as JSON does (`"` and `\` escaped, \b \f
// \n \r \t as those escapes, other control characters as \u00xx) and never as a \uXXXX escape otherwise, so it
// generates a subset of the JSON texts whose value matches. Anything else (backreferences, lookaround, \b, \p{...},
// \c, octal escapes, ^ or $ elsewhere) throws PatternError naming the construct and its offset.
//
// format_gbnf(): GBNF for the whole JSON string of `format` date, time, date-time (RFC 3339 shapes: day
// 01..31 in any month, seconds 00..59, optional .mmm, Z or +hh:mm), uuid (8-4-4-4-12 hex digits), email
// (letters, digits and ._%+- before @, dot-separated labels after, a letter-only last label); empty when the
// format is not one of them.
//
// int_range_gbnf(): GBNF accepting exactly the integers in [lo, hi] written as JSON writes them (no leading
// zeros, "-" only before a non-zero value); lo <= hi, both within +-(10^16 - 1), the integer rule's digits.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ns::grammar {

struct PatternError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string pattern_gbnf(std::string_view pattern);
std::string format_gbnf(std::string_view format);

constexpr int64_t kIntegerLimit = 9999999999999999;  // 16 digits
std::string int_range_gbnf(int64_t lo, int64_t hi);

}  // namespace ns::grammar
