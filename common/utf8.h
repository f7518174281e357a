// One UTF-8 character to and from its code point, as RFC 3629 defines them:
// the grammar's parser and byte ranges, the queue's input check and the
// tests' reference encoder all use these two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ns {

// The 1 to 4 bytes of `cp` (which must be at most U+10FFFF; surrogates are
// encoded as they come, which the tests use to build invalid text).
std::string encode_utf8(uint32_t cp);

// Bytes of the well-formed UTF-8 character at the start of s (its value in
// *cp); 0 if none: empty, cut short, a stray continuation byte, an overlong
// form, a UTF-16 surrogate or a value past U+10FFFF.
size_t decode_utf8(std::string_view s, uint32_t* cp);

}  // namespace ns
