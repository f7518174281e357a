#include "engine/tokenizer/unicode_class.h"

#include <atomic>
#include <memory>
#include <string>

#include "engine/tokenizer/pcre_regex.h"
#include "engine/tokenizer/utf8.h"

namespace ns::tok {

bool is_unicode_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

constexpr uint32_t kMaxCodepoint = 0x110000;
constexpr uint8_t kKnown = 0x80, kLetter = 0x01, kNumber = 0x02;

// 0 = not looked up yet. Relaxed atomics suffice: every thread computes the
// same value for a code point, so a race only repeats a lookup.
std::atomic<uint8_t>* class_table() {
  static std::unique_ptr<std::atomic<uint8_t>[]> table(new std::atomic<uint8_t>[kMaxCodepoint]());
  return table.get();
}

uint8_t lookup(uint32_t cpt) {
  static const auto letter = Regex::compile("\\p{L}");
  static const auto number = Regex::compile("\\p{N}");
  if (cpt >= 0xD800 && cpt <= 0xDFFF) return kKnown;  // surrogates cannot be encoded; not L or N
  const std::string s = utf8_encode(cpt);
  uint8_t v = kKnown;
  if (letter->matches_at(s, 0)) v |= kLetter;
  if (number->matches_at(s, 0)) v |= kNumber;
  return v;
}

}  // namespace

CharClass char_class(uint32_t cpt) {
  CharClass c;
  c.in_range = true;
  c.whitespace = is_unicode_whitespace(cpt);
  if (cpt < 0x80) {
    c.letter = (cpt | 0x20) >= 'a' && (cpt | 0x20) <= 'z';
    c.number = cpt >= '0' && cpt <= '9';
    return c;
  }
  if (cpt >= kMaxCodepoint) return c;
  std::atomic<uint8_t>& slot = class_table()[cpt];
  uint8_t v = slot.load(std::memory_order_relaxed);
  if (v == 0) {
    v = lookup(cpt);
    slot.store(v, std::memory_order_relaxed);
  }
  c.letter = v & kLetter;
  c.number = v & kNumber;
  return c;
}

}  // namespace ns::tok
