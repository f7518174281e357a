#include "engine/sampler/utf8.h"

#include <cstdint>

namespace ns::sampler {
namespace {

// Bytes in the character a lead byte starts (1..4), or 0 for a byte that cannot start one
// (a continuation byte, the overlong leads C0/C1, and F5..FF beyond U+10FFFF).
int announced_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// The second byte's allowed range narrows for four leads; this is what rules out
// overlong 3/4-byte forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
bool second_byte_allowed(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

enum class Sequence { complete, invalid, truncated };

// Checks the character starting at bytes[i] (a byte >= 0x80). On `complete`, *length is its size.
Sequence check_sequence(std::string_view bytes, size_t i, int* length) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  const uint8_t lead = at(i);
  const int need = announced_length(lead);
  if (need == 0) return Sequence::invalid;
  for (int k = 1; k < need; ++k) {
    if (i + k >= bytes.size()) return Sequence::truncated;
    const uint8_t b = at(i + k);
    if (k == 1 ? !second_byte_allowed(lead, b) : !is_continuation(b)) return Sequence::invalid;
  }
  *length = need;
  return Sequence::complete;
}

}  // namespace

size_t valid_utf8_prefix_length(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {  // ASCII: the common case, no decoding
      ++i;
      continue;
    }
    int length = 0;
    if (check_sequence(bytes, i, &length) != Sequence::complete) return i;
    i += static_cast<size_t>(length);
  }
  return i;
}

bool valid_utf8(std::string_view bytes) { return valid_utf8_prefix_length(bytes) == bytes.size(); }

size_t incomplete_utf8_suffix_length(std::string_view bytes) {
  // A character is at most 4 bytes, so an unfinished one starts within the last 3.
  for (size_t k = 1; k <= 3 && k <= bytes.size(); ++k) {
    const size_t start = bytes.size() - k;
    const uint8_t b = static_cast<uint8_t>(bytes[start]);
    if (is_continuation(b)) continue;  // keep looking further back for the lead byte
    int length = 0;
    return check_sequence(bytes, start, &length) == Sequence::truncated ? k : 0;
  }
  return 0;
}

}  // namespace ns::sampler
