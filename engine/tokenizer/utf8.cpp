#include "engine/tokenizer/utf8.h"

namespace ns::tok {

DecodedChar utf8_decode_at(std::string_view text, size_t pos) {
  const size_t n = text.size();
  const auto b = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const auto cont = [&](size_t i) { return pos + i < n && (b(i) & 0xC0) == 0x80; };
  const unsigned char b0 = b(0);
  if (b0 < 0x80) return {b0, 1};
  if (!(b0 & 0x40)) return {kReplacementChar, 1};  // stray continuation byte
  if (!(b0 & 0x20)) {
    if (!cont(1)) return {kReplacementChar, 1};
    return {(uint32_t(b0 & 0x1F) << 6) | (b(1) & 0x3F), 2};
  }
  if (!(b0 & 0x10)) {
    if (!cont(1) || !cont(2)) return {kReplacementChar, 1};
    return {(uint32_t(b0 & 0x0F) << 12) | (uint32_t(b(1) & 0x3F) << 6) | (b(2) & 0x3F), 3};
  }
  if (!(b0 & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) return {kReplacementChar, 1};
    return {(uint32_t(b0 & 0x07) << 18) | (uint32_t(b(1) & 0x3F) << 12) | (uint32_t(b(2) & 0x3F) << 6) | (b(3) & 0x3F),
            4};
  }
  return {kReplacementChar, 1};
}

void utf8_append(std::string& out, uint32_t cpt) {
  if (cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) cpt = kReplacementChar;
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

std::string utf8_encode(uint32_t cpt) {
  std::string s;
  utf8_append(s, cpt);
  return s;
}

CodepointText utf8_decode_all(std::string_view text) {
  CodepointText r;
  r.cpts.reserve(text.size());
  r.offsets.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const DecodedChar c = utf8_decode_at(text, pos);
    r.cpts.push_back(c.cpt);
    r.offsets.push_back(static_cast<uint32_t>(pos));
    pos += c.len;
  }
  r.offsets.push_back(static_cast<uint32_t>(text.size()));
  return r;
}

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    const DecodedChar c = utf8_decode_at(text, pos);
    utf8_append(out, c.cpt);
    pos += c.len;
  }
  return out;
}

}  // namespace ns::tok
