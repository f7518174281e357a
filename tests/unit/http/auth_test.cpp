// The HTTP API's keys: the constant-time comparison, the Authorization header
// check, and the keys file's errors (which never show a key).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "common/error.h"
#include "daemon/http/auth.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns::http;

TEST_CASE("equal_constant_time is equality, whatever the lengths") {
  CHECK(equal_constant_time("abcdef0123456789", "abcdef0123456789"));
  CHECK_FALSE(equal_constant_time("abcdef0123456789", "abcdef0123456788"));
  CHECK_FALSE(equal_constant_time("abcdef0123456789", "Xbcdef0123456789"));
  CHECK_FALSE(equal_constant_time("abcdef0123456789", "abcdef012345678"));    // a prefix
  CHECK_FALSE(equal_constant_time("abcdef0123456789", "abcdef01234567890"));  // one more
  CHECK_FALSE(equal_constant_time("abc", ""));
  CHECK_FALSE(equal_constant_time("", "abc"));
  CHECK(equal_constant_time("", ""));
  // A key followed by zero bytes is not the key (the loop pads `given` with zeros).
  CHECK_FALSE(equal_constant_time(std::string("abc\0", 4), "abc"));
  CHECK_FALSE(equal_constant_time("abc", std::string("abc\0", 4)));
}

TEST_CASE("KeyCheck: Bearer and one of the keys") {
  const KeyCheck none;
  CHECK_FALSE(none.required());
  CHECK(none.accepts(""));

  const KeyCheck keys({"first-key-0123456789", "second-key-0123456789"});
  CHECK(keys.required());
  CHECK(keys.accepts("Bearer first-key-0123456789"));
  CHECK(keys.accepts("Bearer second-key-0123456789"));
  CHECK(keys.accepts("Bearer second-key-0123456789 "));  // trailing space trimmed
  CHECK_FALSE(keys.accepts(""));
  CHECK_FALSE(keys.accepts("first-key-0123456789"));  // no scheme
  CHECK_FALSE(keys.accepts("Basic first-key-0123456789"));
  CHECK_FALSE(keys.accepts("Bearer first-key-012345678"));
  CHECK_FALSE(keys.accepts("Bearer third-key-0123456789"));
  CHECK_FALSE(keys.accepts("Bearer "));
}

TEST_CASE("load_api_keys: one a line, comments skipped, errors name the file and never a key") {
  ns::test::TempDir dir;
  const auto write = [&](const std::string& text) {
    std::ofstream(dir.file("keys")) << text;
    return dir.file("keys");
  };
  CHECK(load_api_keys(write("# ops team\n  key-one-0123456789abcdef  \n\nkey-two-0123456789abcdef\r\n")) ==
        std::vector<std::string>{"key-one-0123456789abcdef", "key-two-0123456789abcdef"});

  const auto error_of = [&](const std::string& path) -> std::string {
    try {
      load_api_keys(path);
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      return e.what();
    }
    return "";
  };
  std::string e = error_of(write("# nothing yet\n\n"));
  CHECK_MESSAGE(e.find("holds no key") != std::string::npos, e);
  e = error_of(write("short-secret\n"));
  CHECK_MESSAGE(e.find("line 1") != std::string::npos, e);
  CHECK_MESSAGE(e.find("short-secret") == std::string::npos, e);  // the key is not in the message
  e = error_of(dir.file("absent"));
  CHECK_MESSAGE(e.find(dir.file("absent")) != std::string::npos, e);
}
