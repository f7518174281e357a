#include "common/utf8.h"

namespace ns {
namespace {

// What may follow a lead byte (Unicode Table 3-7, "well-formed UTF-8 byte
// sequences"): how many continuation bytes, and the range of the first (the
// narrow ones rule out overlong forms, surrogates and values past U+10FFFF).
// 0 continuations: not a lead (a continuation byte, C0, C1, F5..FF).
struct LeadRule {
  int continuations;
  uint8_t first_lo, first_hi;
};

LeadRule rule_for(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {1, 0x80, 0xBF};
  if (lead == 0xE0) return {2, 0xA0, 0xBF};
  if (lead == 0xED) return {2, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {2, 0x80, 0xBF};
  if (lead == 0xF0) return {3, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {3, 0x80, 0xBF};
  if (lead == 0xF4) return {3, 0x80, 0x8F};
  return {0, 0, 0};
}

enum class Form { complete, invalid, truncated };

// The character at s[i] (i < s.size()): `complete` with its bytes; else
// `invalid` or `truncated` (the text ends inside it) with the bytes of its
// maximal subpart: the lead and each following byte that may continue it.
struct Sequence {
  Form form;
  size_t bytes;
};

Sequence read_sequence(std::string_view s, size_t i) {
  const auto lead = static_cast<uint8_t>(s[i]);
  if (lead < 0x80) return {Form::complete, 1};
  const LeadRule rule = rule_for(lead);
  if (rule.continuations == 0) return {Form::invalid, 1};
  size_t n = 1;
  for (int k = 0; k < rule.continuations; ++k, ++n) {
    if (i + n >= s.size()) return {Form::truncated, n};
    const auto c = static_cast<uint8_t>(s[i + n]);
    const uint8_t lo = k == 0 ? rule.first_lo : 0x80, hi = k == 0 ? rule.first_hi : 0xBF;
    if (c < lo || c > hi) return {Form::invalid, n};
  }
  return {Form::complete, n};
}

}  // namespace

std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

size_t decode_utf8(std::string_view s, uint32_t* cp) {
  if (s.empty()) return 0;
  const Sequence seq = read_sequence(s, 0);
  if (seq.form != Form::complete) return 0;
  static constexpr uint8_t kLeadBits[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t v = static_cast<uint8_t>(s[0]) & kLeadBits[seq.bytes];
  for (size_t k = 1; k < seq.bytes; ++k) v = (v << 6) | (static_cast<uint8_t>(s[k]) & 0x3F);
  *cp = v;
  return seq.bytes;
}

size_t valid_utf8_prefix_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {  // ASCII: the common case
      ++i;
      continue;
    }
    const Sequence seq = read_sequence(s, i);
    if (seq.form != Form::complete) return i;
    i += seq.bytes;
  }
  return i;
}

bool valid_utf8(std::string_view s) { return valid_utf8_prefix_length(s) == s.size(); }

size_t incomplete_utf8_suffix_length(std::string_view s) {
  // A character is at most 4 bytes, so an unfinished one starts within the last 3.
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const size_t start = s.size() - k;
    if ((static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) continue;  // a continuation: its lead is further back
    return read_sequence(s, start).form == Form::truncated ? k : 0;
  }
  return 0;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Sequence seq = read_sequence(s, i);
    if (seq.form == Form::complete) {
      out.append(s.substr(i, seq.bytes));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += seq.bytes;
  }
  return out;
}

}  // namespace ns
