// Grammars for constrained decoding: GBNF text (llama.cpp server's `grammar`
// field syntax) parsed into a compact byte-level form the matcher walks.
//
// GBNF accepted here:
//   name ::= alternatives          rules; names are letters, digits, '-' and '_'; one rule is `root`
//   a b | c                        sequence and alternation (an alternation may continue on the next line
//                                  when that line starts with '|'; inside ( ) newlines are free)
//   "lit\n"  [a-z\x41\u00e9]       string literals and character classes with escapes \n \r \t \\ \" \' \[ \]
//   [^...]  .                      \- \xHH \uHHHH \UHHHHHHHH; negated classes; `.` = any character
//   ( ... )                        groups
//   x* x+ x? x{m} x{m,} x{m,n}     repetition of the item before (a whole literal, class, name or group)
//   # ...                          comments to the end of the line
//
// Representation: characters are compiled to UTF-8 bytes, so the matcher is a
// byte-level recognizer. A character class becomes one byte-set element when
// it holds only ASCII, else a helper rule whose alternatives are UTF-8 byte
// range sequences (RE2's construction); repetitions become helper rules
// (x* = r ::= x r | ε, right recursive, so the matcher's stack does not grow).
//
// Contract: parse_gbnf() throws ns::Error(invalid_input) naming the line and
// column, or the rule, of the first problem: bad syntax, a rule used but never
// defined, no `root`, left recursion (which a stack-based matcher cannot run),
// repetition bounds above 10000. Deterministic: the same text gives the same Grammar.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ns::grammar {

// 256 bits: which bytes an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Grammar {
  enum class Kind : uint8_t { end, bytes, ref };
  // One element of an alternative. bytes: arg indexes `sets`; ref: arg is a rule id;
  // end: closes the alternative.
  struct Elem {
    Kind kind;
    uint32_t arg;
  };
  std::vector<Elem> elems;                   // every alternative, each closed by an `end`
  std::vector<ByteSet> sets;                 // distinct byte sets
  std::vector<std::vector<uint32_t>> rules;  // rule id -> start positions of its alternatives in elems
  std::vector<std::string> rule_names;       // helper rules are named after their parent (parent_3)
  uint32_t root = 0;

  // The GBNF text the grammar came from, and a 64-bit hash of it (the cache key).
  std::string source;
  uint64_t hash = 0;
};

Grammar parse_gbnf(std::string_view text);

// FNV-1a, 64 bits: the key grammars and compiled schemas are cached under.
uint64_t text_hash(std::string_view text);

}  // namespace ns::grammar
