// Character classes the pre-tokenizers' hand-written splitters need:
// letter (\p{L}), number (\p{N}) and whitespace.
//
// Letters and numbers come from PCRE2's Unicode tables (asked once per code
// point, then remembered in a process-wide table; thread-safe). Whitespace is
// the Unicode White_Space set, which is what llama.cpp treats as whitespace
// (it includes U+0085, which PCRE2's \s does not).
#pragma once

#include <cstdint>

namespace ns::tok {

struct CharClass {
  bool letter = false;
  bool number = false;
  bool whitespace = false;
  bool in_range = false;  // false only for the "past the end" sentinel (llama.cpp's empty flags)
};

bool is_unicode_whitespace(uint32_t cpt);
CharClass char_class(uint32_t cpt);

}  // namespace ns::tok
