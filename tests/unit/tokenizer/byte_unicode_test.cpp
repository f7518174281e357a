#include <doctest/doctest.h>

#include <set>
#include <string>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/unicode_class.h"
#include "common/utf8.h"
#include "engine/tokenizer/utf8.h"

using namespace ns::tok;

TEST_CASE("byte-to-unicode: GPT-2's table") {
  CHECK(byte_to_unicode('A') == "A");
  CHECK(byte_to_unicode('!') == "!");
  CHECK(byte_to_unicode(' ') == "\xC4\xA0");   // 'Ġ' U+0120
  CHECK(byte_to_unicode('\n') == "\xC4\x8A");  // 'Ċ' U+010A
  CHECK(byte_to_unicode('\t') == "\xC4\x89");  // 'ĉ' U+0109
  CHECK(byte_to_unicode(0x00) == "\xC4\x80");  // 'Ā' U+0100, the first remapped byte
  CHECK(byte_to_unicode(0xAD) == "\xC5\x83");  // soft hyphen is remapped: the last one, U+0143
  CHECK(byte_to_unicode(0xA1) == "\xC2\xA1");  // '¡' stands for itself
  CHECK(byte_to_unicode(0xFF) == "\xC3\xBF");  // 'ÿ'
}

TEST_CASE("byte-to-unicode: a bijection onto printable characters") {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& s = byte_to_unicode(static_cast<uint8_t>(b));
    CHECK(ns::valid_utf8(s));
    const DecodedChar d = utf8_decode_at(s, 0);
    CHECK(d.len == s.size());
    CHECK(unicode_to_byte(d.cpt) == b);
    CHECK_FALSE(is_unicode_whitespace(d.cpt));
    CHECK(d.cpt > 0x20);
    seen.insert(s);
  }
  CHECK(seen.size() == 256);
  CHECK(unicode_to_byte(0x20) == -1);  // a raw space is never in a byte-level spelling
  CHECK(unicode_to_byte(0x144) == -1);
  CHECK(unicode_to_byte(0x4E2D) == -1);

  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string spelled;
  append_byte_encoded(spelled, all);
  CHECK(ns::valid_utf8(spelled));
  CHECK(utf8_decode_all(spelled).cpts.size() == 256);
}

TEST_CASE("character classes follow Unicode") {
  CHECK(char_class('a').letter);
  CHECK(char_class(0x4E2D).letter);   // 中
  CHECK(char_class(0x0416).letter);   // Ж
  CHECK(char_class(0x10400).letter);  // 𐐀 (4-byte)
  CHECK(char_class('7').number);
  CHECK(char_class(0x0663).number);         // Arabic-Indic three
  CHECK(char_class(0x00BD).number);         // ½ (No)
  CHECK_FALSE(char_class(0x1F999).letter);  // 🦙
  CHECK_FALSE(char_class(0x1F999).number);
  CHECK(char_class(0x85).whitespace);  // NEL counts, as in llama.cpp
  CHECK(char_class(0x3000).whitespace);
  CHECK_FALSE(char_class(0x200B).whitespace);  // zero-width space is not White_Space
  CHECK(char_class(0x200B).in_range);
  CHECK_FALSE(CharClass{}.in_range);
}
