// UTF-8 helpers, checked against a reference decoder that works from code point arithmetic
// (rather than the byte-range table the implementation uses).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>

#include "common/utf8.h"

using ns::incomplete_utf8_suffix_length;
using ns::valid_utf8;
using ns::valid_utf8_prefix_length;

namespace {

// Decodes by bit patterns, then rejects what RFC 3629 forbids: overlong forms, surrogates,
// code points above U+10FFFF.
bool reference_valid(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    int extra;
    uint32_t cp;
    if (b < 0x80) {
      extra = 0;
      cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      extra = 1;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      extra = 2;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      extra = 3;
      cp = b & 0x07;
    } else
      return false;
    if (i + extra >= s.size()) return false;  // truncated
    for (int k = 1; k <= extra; ++k) {
      const uint8_t c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[extra] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace

TEST_CASE("valid text of every length class") {
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("plain ascii\n"));
  CHECK(valid_utf8(std::string("nul \0 inside", 12)));
  CHECK(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  CHECK(valid_utf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
  CHECK(valid_utf8("\xED\x9F\xBF\xEE\x80\x80"));                   // U+D7FF, U+E000 around the surrogates
}

TEST_CASE("invalid forms are rejected") {
  CHECK_FALSE(valid_utf8("\x80"));      // stray continuation
  CHECK_FALSE(valid_utf8("\xC0\xAF"));  // overlong '/'
  CHECK_FALSE(valid_utf8("\xC1\xBF"));
  CHECK_FALSE(valid_utf8("\xE0\x80\xAF"));      // overlong 3-byte
  CHECK_FALSE(valid_utf8("\xF0\x80\x80\xAF"));  // overlong 4-byte
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // U+110000
  CHECK_FALSE(valid_utf8("\xF5\x80\x80\x80"));
  CHECK_FALSE(valid_utf8("\xFF"));
  CHECK_FALSE(valid_utf8("\xE2\x82"));  // truncated
  CHECK_FALSE(
      valid_utf8("\xE2"
                 "A\xAC"));  // lead byte followed by ASCII
}

TEST_CASE("the longest valid prefix stops before the first bad or unfinished character") {
  CHECK(valid_utf8_prefix_length("ab\xE2\x82") == 2);
  CHECK(valid_utf8_prefix_length("ab\xE2\x82\xAC\xFF"
                                 "cd") == 5);
  CHECK(valid_utf8_prefix_length("\x80"
                                 "abc") == 0);
  CHECK(valid_utf8_prefix_length("abc") == 3);
}

TEST_CASE("an unfinished character at the end is measured; anything else is not") {
  CHECK(incomplete_utf8_suffix_length("") == 0);
  CHECK(incomplete_utf8_suffix_length("ab") == 0);
  CHECK(incomplete_utf8_suffix_length("\xC3") == 1);
  CHECK(incomplete_utf8_suffix_length("ab\xE2\x82") == 2);
  CHECK(incomplete_utf8_suffix_length("ab\xF0") == 1);
  CHECK(incomplete_utf8_suffix_length("ab\xF0\x9F\x98") == 3);
  CHECK(incomplete_utf8_suffix_length("ab\xE2\x82\xAC") == 0);  // complete €
  CHECK(incomplete_utf8_suffix_length("ab\x82") == 0);          // stray: waiting would not help
  CHECK(incomplete_utf8_suffix_length("ab\xE0\x80") == 0);      // can never become valid
  CHECK(incomplete_utf8_suffix_length("ab\xED\xA0") == 0);      // would be a surrogate
  CHECK(incomplete_utf8_suffix_length("\xFF\xC3") == 1);        // earlier garbage does not matter
}

TEST_CASE("every code point round-trips; every split of it is an unfinished suffix") {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string c = ns::encode_utf8(cp);
    REQUIRE(valid_utf8(c));
    if (cp % 61 != 0) continue;  // splits on a sample keeps the test fast
    for (size_t j = 1; j < c.size(); ++j) {
      const std::string cut = "x" + c.substr(0, j);
      REQUIRE(incomplete_utf8_suffix_length(cut) == j);
      REQUIRE(valid_utf8_prefix_length(cut) == 1);
    }
  }
  for (uint32_t cp = 0xD800; cp <= 0xDFFF; ++cp) REQUIRE_FALSE(valid_utf8(ns::encode_utf8(cp)));
}

TEST_CASE("agrees with the reference decoder on every 1-, 2- and 3-byte string") {
  for (uint32_t v = 0; v < 0x100; ++v) {
    const std::string s(1, static_cast<char>(v));
    REQUIRE(valid_utf8(s) == reference_valid(s));
  }
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const std::string s = {static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)};
    REQUIRE(valid_utf8(s) == reference_valid(s));
  }
  for (uint32_t v = 0; v < 0x1000000; v += 7) {  // a stride keeps it to ~2.4 M strings
    const std::string s = {static_cast<char>(v >> 16), static_cast<char>((v >> 8) & 0xFF), static_cast<char>(v & 0xFF)};
    REQUIRE(valid_utf8(s) == reference_valid(s));
  }
  std::mt19937 gen(3);  // 4-byte strings: random continuations after every 4-byte-ish lead
  for (int i = 0; i < 200000; ++i) {
    const std::string s = {static_cast<char>(0xF0 + i % 8), static_cast<char>(0x80 + gen() % 0x40),
                           static_cast<char>(gen() % 0x100), static_cast<char>(0x80 + gen() % 0x40)};
    REQUIRE(valid_utf8(s) == reference_valid(s));
  }
}
