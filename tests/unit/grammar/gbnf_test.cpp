// GBNF parsing: good grammars match what they should, bad ones are refused with a located message.
#include <doctest/doctest.h>

#include <utility>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using ns::grammar::Matcher;
using ns::grammar::parse_gbnf;

namespace {

// Whole-string match: accepted and complete.
bool matches(const ns::grammar::Grammar& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.complete();
}

// The refusal of `text`, or "" if it parses.
std::string error_of(std::string_view text) {
  return ns::test::error_message(ns::ErrorKind::invalid_input, [&] { parse_gbnf(text); });
}

}  // namespace

TEST_CASE("gbnf: sequences, alternation, groups and literals with escapes") {
  const auto g = parse_gbnf(R"(
# a comment
root ::= greeting " " name   # trailing comment
greeting ::= "hi" | "hello"
  | "hey"
name ::= ("bob" | "al\x69ce") "\n\t\"\\"
)");
  CHECK(matches(g, "hi bob\n\t\"\\"));
  CHECK(matches(g, "hey alice\n\t\"\\"));
  CHECK_FALSE(matches(g, "hi bob"));
  CHECK_FALSE(matches(g, "yo bob\n\t\"\\"));
  CHECK(g.hash == ns::grammar::text_hash(g.source));
}

TEST_CASE("gbnf: repetitions") {
  const auto g = parse_gbnf(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,} ("gh"){0,1})");
  CHECK(matches(g, "bddeff"));
  CHECK(matches(g, "aaabbbcddeeeffffgh"));
  CHECK_FALSE(matches(g, "ddeff"));      // b+ needs one
  CHECK_FALSE(matches(g, "bdeff"));      // d{2}
  CHECK_FALSE(matches(g, "bddeeeeff"));  // e{1,3}
  CHECK_FALSE(matches(g, "bddef"));      // f{2,}
  CHECK_FALSE(matches(g, "bddeffg"));    // the whole literal repeats
}

TEST_CASE("gbnf: character classes, ranges, negation, any, Unicode") {
  const auto g = parse_gbnf(R"(root ::= [a-c0-9_] [^a-z] [\u00e9-\u00ea] . [^"\\])");
  CHECK(matches(g, "a!é\xF0\x9F\x98\x80x"));
  CHECK(matches(g, "9ZêZ\xE2\x82\xAC"));
  CHECK_FALSE(matches(g, "d!éxx"));
  CHECK_FALSE(matches(g, "aa\xC3\xA9xx"));
  CHECK_FALSE(matches(g, "a!èxx"));
  CHECK_FALSE(matches(g, "a!éx\""));
  CHECK_FALSE(matches(g, "a!éx\xC3"));          // an incomplete character is not a character
  CHECK_FALSE(matches(g, "a!é\xED\xA0\x80x"));  // a surrogate is not UTF-8
}

TEST_CASE("gbnf: right recursion and nesting") {
  const auto g = parse_gbnf("root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+ | list\n");
  CHECK(matches(g, "[]"));
  CHECK(matches(g, "[1,[2,[3]],[]]"));
  CHECK_FALSE(matches(g, "[1,]"));
  CHECK_FALSE(matches(g, "[[1]"));
}

TEST_CASE("gbnf: bad grammars name the problem and where") {
  // A grammar, and what its refusal says.
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"foo ::= \"a\"", "no rule named 'root'"},
      {"root ::= bar", "'bar' is used but never defined"},
      {"root ::= \"abc", "line 1"},
      {"root ::= \"abc", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= [z-a]", "backwards"},
      {"root ::= (\"a\"", "')'"},
      {"root ::= * \"a\"", "nothing before it"},
      {"root ::= \"a\"{3,1}", "n < m"},
      {"root ::= \"a\"{20000}", "above 10000"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= x \"a\"\nx ::= \"b\"? root", "left-recursive"},
      {"root ::= (\"a\"?)*", "left-recursive"},
      {"root = \"a\"", "::="},
      {"root ::= \"a\" )", "line 1, column 14: unexpected ')'"},
  };
  for (const auto& [grammar, says] : cases) {
    CAPTURE(grammar);
    CHECK(ns::test::contains(error_of(grammar), says));
  }
}
