#include "engine/tokenizer/byte_unicode.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace ns::tok {

namespace {

bool maps_to_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int, 256 + 68> to_byte;  // indexed by code point; covers U+0000..U+0143
  Tables() {
    to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const int cpt = maps_to_itself(b) ? b : next++;
      to_char[b] = utf8_encode(static_cast<uint32_t>(cpt));
      to_byte[cpt] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().to_char[b]; }

int unicode_to_byte(uint32_t cpt) {
  const auto& t = tables().to_byte;
  return cpt < t.size() ? t[cpt] : -1;
}

void append_byte_encoded(std::string& out, std::string_view bytes) {
  const auto& t = tables().to_char;
  for (unsigned char b : bytes) out += t[b];
}

}  // namespace ns::tok
