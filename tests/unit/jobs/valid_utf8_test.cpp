// Stored generated text is valid UTF-8: broken sequences become U+FFFD.
#include <doctest/doctest.h>

#include <string>

#include "common/utf8.h"
#include "jobs/valid_utf8.h"

using ns::to_valid_utf8;

TEST_CASE("valid text is unchanged") {
  for (const std::string s : {"", "plain ASCII", "caf\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "\xF0\x9F\x98\x80 ok"}) {
    CHECK(to_valid_utf8(s) == s);
  }
}

// Python's bytes.decode("utf-8", "replace") follows the same rule (one
// U+FFFD per maximal subpart): the integration tests compare with it.
TEST_CASE("a character cut at the end, stray and invalid bytes become U+FFFD") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(to_valid_utf8("ab\xE4\xB8") == "ab" + fffd);  // cut after 2 of 3 bytes
  CHECK(to_valid_utf8("a\x80\x80"
                      "b") == "a" + fffd + fffd + "b");  // stray continuation bytes: one each
  CHECK(to_valid_utf8("\xFF"
                      "x\xC0\xAF") == fffd + "x" + fffd + fffd);          // never valid; overlong '/'
  CHECK(to_valid_utf8("\xED\xA0\x80z") == fffd + fffd + fffd + "z");      // a UTF-16 surrogate
  CHECK(to_valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
  CHECK(to_valid_utf8("\xF0\x9F\x98"
                      "!") == fffd + "!");  // 3 of 4 bytes: one maximal subpart
  CHECK(to_valid_utf8("\xE4\xB8"
                      "\xE4\xB8\xAD") == fffd + "\xE4\xB8\xAD");  // a good one right after
}

TEST_CASE("storable_text: NUL bytes become U+FFFD as invalid bytes do, other text is unchanged") {
  using namespace std::string_literals;
  CHECK(ns::jobs::storable_text("a\0b"s) ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(ns::jobs::storable_text("\0\0"s) == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(ns::jobs::storable_text("\xC3\0"s) == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(ns::jobs::storable_text("caf\xC3\xA9 \xE5\x86\x99") == "caf\xC3\xA9 \xE5\x86\x99");
}
