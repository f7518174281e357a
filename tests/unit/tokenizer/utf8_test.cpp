#include <doctest/doctest.h>

#include <string>

#include "common/utf8.h"
#include "engine/tokenizer/utf8.h"

using namespace ns::tok;

TEST_CASE("utf8: encode/decode round trip over every code point length") {
  for (uint32_t c :
       {0x00u, 0x41u, 0x7Fu, 0x80u, 0xFCu, 0x7FFu, 0x800u, 0x4E2Du, 0xFFFDu, 0xFFFFu, 0x10000u, 0x1F999u, 0x10FFFFu}) {
    const std::string s = utf8_encode(c);
    CHECK(s.size() == (c < 0x80 ? 1u : c < 0x800 ? 2u : c < 0x10000 ? 3u : 4u));
    const DecodedChar d = utf8_decode_at(s, 0);
    CHECK(d.cpt == c);
    CHECK(d.len == s.size());
    CHECK(ns::valid_utf8(s));
  }
  // Values that cannot be encoded come out as U+FFFD, so output stays valid.
  CHECK(utf8_encode(0xD800) == "\xEF\xBF\xBD");
  CHECK(utf8_encode(0x110000) == "\xEF\xBF\xBD");
}

TEST_CASE("utf8: decoding a 4-byte character and its offsets") {
  const std::string s =
      "a\xF0\x9F\xA6\x99"
      "b";  // a 🦙 b
  const CodepointText ct = utf8_decode_all(s);
  REQUIRE(ct.cpts.size() == 3);
  CHECK(ct.cpts[1] == 0x1F999);
  CHECK(ct.offsets == std::vector<uint32_t>{0, 1, 5, 6});
}

TEST_CASE("utf8: invalid input becomes one U+FFFD per bad byte, never reading past the end") {
  struct Case {
    std::string bytes;
    std::vector<uint32_t> cpts;
  };
  const Case cases[] = {
      {"\x80", {kReplacementChar}},                                              // stray continuation byte
      {"\xC3", {kReplacementChar}},                                              // truncated 2-byte sequence at the end
      {"\xF0\x9F\xA6", {kReplacementChar, kReplacementChar, kReplacementChar}},  // truncated 4-byte
      {"\xE4\xB8"
       "A",
       {kReplacementChar, kReplacementChar, 'A'}},         // lead + continuation, then ASCII
      {"\xFF\xFE", {kReplacementChar, kReplacementChar}},  // never valid in UTF-8
      {"\xC0\xAF", {0x2F}},                                // overlong '/': decoded as written (llama.cpp)
      {"\xED\xA0\x80", {0xD800}},                          // surrogate: decoded as written
  };
  for (const Case& c : cases) {
    CAPTURE(c.bytes);
    const CodepointText ct = utf8_decode_all(c.bytes);
    CHECK(ct.cpts == c.cpts);
    CHECK(ct.offsets.back() == c.bytes.size());
    CHECK_FALSE(ns::valid_utf8(c.bytes));
  }
  // Every prefix of a multi-byte text decodes without running past its end.
  const std::string text = "\xE6\x9D\xB1\xE4\xBA\xAC\xF0\x9F\x9A\x80";
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::string prefix = text.substr(0, n);
    const CodepointText ct = utf8_decode_all(prefix);
    CHECK(ct.offsets.back() == n);
  }
  CHECK(ns::valid_utf8("\xEF\xBF\xBD"));  // a real U+FFFD is valid
}

TEST_CASE("utf8: sequence length from the lead byte") {
  CHECK(utf8_seq_len('a') == 1);
  CHECK(utf8_seq_len(0x80) == 1);  // continuation bytes stand alone
  CHECK(utf8_seq_len(0xC3) == 2);
  CHECK(utf8_seq_len(0xE4) == 3);
  CHECK(utf8_seq_len(0xF0) == 4);
  CHECK(utf8_seq_len(0xFF) == 4);
}
