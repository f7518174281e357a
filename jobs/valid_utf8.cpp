#include "jobs/valid_utf8.h"

#include "common/utf8.h"

namespace ns::jobs {
std::string storable_text(std::string_view text) {
  std::string out = to_valid_utf8(text);
  for (size_t at = out.find('\0'); at != std::string::npos; at = out.find('\0', at)) out.replace(at, 1, "\xEF\xBF\xBD");
  return out;
}

}  // namespace ns::jobs
