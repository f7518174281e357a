// GPT-2's reversible byte <-> character mapping used by byte-level BPE
// vocabularies: printable bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// themselves; the other 68 bytes map in order to U+0100, U+0101, ... so that
// every token text is printable (a space becomes 'Ġ' U+0120, '\n' 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ns::tok {

// The character (as UTF-8) that byte b is written as in a byte-level vocabulary.
const std::string& byte_to_unicode(uint8_t b);

// The byte a character of a byte-level vocabulary stands for, or -1 if the
// code point is not one of the 256 mapped characters.
int unicode_to_byte(uint32_t cpt);

// Appends the byte-level spelling of raw bytes (each byte becomes its character).
void append_byte_encoded(std::string& out, std::string_view bytes);

}  // namespace ns::tok
