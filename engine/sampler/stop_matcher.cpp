#include "engine/sampler/stop_matcher.h"

#include "common/error.h"
#include "common/utf8.h"

namespace ns::sampler {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, size_t reserve_bytes)
    : stops_(std::move(stop_strings)) {
  for (size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty())
      throw Error(ErrorKind::invalid_input,
                  "stop[" + std::to_string(i) + "] is empty: remove it or give a non-empty string");
  text_.reserve(reserve_bytes);
}

bool StopMatcher::feed(std::string_view piece) {
  if (stopped()) return true;
  text_.append(piece);

  // A stop string completed by this piece began at or after hold_from_: had it begun earlier,
  // that earlier position would have been a partial match. Scan candidate starts in order so
  // the earliest occurrence wins; remember the first start that is still a partial match.
  size_t first_partial = text_.size();
  for (size_t pos = hold_from_; pos < text_.size(); ++pos) {
    const std::string_view rest = std::string_view(text_).substr(pos);
    for (size_t s = 0; s < stops_.size(); ++s) {
      const std::string& stop = stops_[s];
      if (rest.size() >= stop.size()) {
        if (rest.compare(0, stop.size(), stop) == 0) {
          matched_ = static_cast<int>(s);
          text_.resize(pos);
          hold_from_ = pos;
          return true;
        }
      } else if (first_partial == text_.size() && std::string_view(stop).starts_with(rest)) {
        first_partial = pos;
      }
    }
  }
  hold_from_ = first_partial;
  return false;
}

size_t StopMatcher::safe_length() const {
  if (stopped()) return text_.size();
  const std::string_view settled = std::string_view(text_).substr(0, hold_from_);
  return settled.size() - incomplete_utf8_suffix_length(settled);
}

}  // namespace ns::sampler
