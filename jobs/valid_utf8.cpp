#include "jobs/valid_utf8.h"

#include <cstdint>

namespace ns::jobs {
namespace {

// The bytes allowed after lead byte `lead` (Unicode Table 3-7, "well-formed
// UTF-8 byte sequences"): the range of the first continuation byte, and how
// many continuation bytes follow in all. 0 continuation bytes: not a lead.
struct LeadRule {
  int continuations;
  uint8_t first_lo, first_hi;
};

LeadRule rule_for(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {1, 0x80, 0xBF};
  if (lead == 0xE0) return {2, 0xA0, 0xBF};
  if (lead == 0xED) return {2, 0x80, 0x9F};  // no UTF-16 surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {2, 0x80, 0xBF};
  if (lead == 0xF0) return {3, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {3, 0x80, 0xBF};
  if (lead == 0xF4) return {3, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    const LeadRule rule = rule_for(lead);
    // Take the lead and each following byte while it may continue the
    // character: a complete character is copied, an incomplete one (the
    // "maximal subpart", as WHATWG and Python decode it) is one U+FFFD.
    size_t n = 1;
    for (int k = 0; k < rule.continuations && i + n < text.size(); ++k, ++n) {
      const auto c = static_cast<uint8_t>(text[i + n]);
      const uint8_t lo = k == 0 ? rule.first_lo : 0x80, hi = k == 0 ? rule.first_hi : 0xBF;
      if (c < lo || c > hi) break;
    }
    if (rule.continuations > 0 && n == static_cast<size_t>(rule.continuations) + 1) {
      out.append(text.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += n;
  }
  return out;
}

std::string storable_text(std::string_view text) {
  std::string out = to_valid_utf8(text);
  for (size_t at = out.find('\0'); at != std::string::npos; at = out.find('\0', at)) out.replace(at, 1, "\xEF\xBF\xBD");
  return out;
}

}  // namespace ns::jobs
