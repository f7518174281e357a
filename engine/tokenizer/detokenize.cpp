#include "engine/tokenizer/detokenize.h"

namespace ns::tok {

// In-place passes written exactly as llama.cpp's (including the '\0' it
// writes over the space after a lone apostrophe, which later checks see).
void clean_up_spaces(std::string& s) {
  char* text = s.data();
  size_t total = s.size();

  const size_t total1 = total;
  total = total ? 1 : 0;
  for (size_t i = 1; i < total1; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }

  const size_t total2 = total;
  total = total ? 1 : 0;
  for (size_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;           // the space before
      text[++i] = '\0';  // and skip the space after
    }
    text[total++] = x;
  }

  const size_t total3 = total;
  total = total ? 1 : 0;
  for (size_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  s.resize(total);
}

}  // namespace ns::tok
