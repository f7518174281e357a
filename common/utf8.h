// UTF-8 as RFC 3629 defines it (Unicode's Table 3-7), the one set of
// functions for the tree: a character to and from its code point (the
// grammar's parser and byte ranges, JSON schemas, the Jinja lexer, the
// tests' reference encoder), and whole texts checked (the queue's input
// check), cut (streamed output never ends inside a character) and repaired
// (generated text as it is stored, exported and shown).
//
// Contract: "valid" is strict: no overlong forms, no UTF-16 surrogates
// (U+D800..DFFF), nothing above U+10FFFF, no stray continuation bytes;
// U+0000 is valid. Pure functions of their arguments; thread-safe. The
// tokenizers group bytes as llama.cpp does (leniently, which their tokens
// depend on): engine/tokenizer/utf8.h, not this.
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

// Bytes in the longest prefix of `s` that is valid (s.size() when all of it is).
size_t valid_utf8_prefix_length(std::string_view s);

// True when every byte of `s` belongs to a well-formed character.
bool valid_utf8(std::string_view s);

// Bytes (0..3) at the end of `s` that begin a character still missing its
// last bytes: a lead byte followed by fewer continuation bytes than it
// announces, each allowed where it stands. A streamer emits s.size() minus
// this and waits for the rest; unlike valid_utf8_prefix_length, an invalid
// byte earlier in the text does not stall it.
size_t incomplete_utf8_suffix_length(std::string_view s);

// `s` with every invalid byte sequence replaced by U+FFFD, one per maximal
// invalid subpart (the lead and the bytes that may still continue it, as
// WHATWG and Python decode); valid text comes back unchanged.
std::string to_valid_utf8(std::string_view s);

}  // namespace ns
