// Watches generated text for stop strings. The engine feeds each token's
// detokenized bytes as they come; the matcher says when a stop string has
// appeared (the output is then the text before it) and how much of the text
// can be streamed out now without ever emitting bytes that turn out to be
// part of a stop string, or half of a UTF-8 character.
// Matching is on bytes, so stop strings may span token boundaries and contain
// multi-byte characters. The earliest occurrence of any stop string wins.
// Not thread-safe: one matcher per sequence.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ns::sampler {

class StopMatcher {
 public:
  // Throws ns::Error(invalid_input) for an empty stop string (it would match before any output).
  // `reserve_bytes` pre-sizes the text buffer so feeding does not allocate in the token loop.
  explicit StopMatcher(std::vector<std::string> stop_strings, size_t reserve_bytes = 0);

  // Appends a piece of output. Returns stopped(). Pieces fed after a stop are ignored.
  bool feed(std::string_view piece);

  bool stopped() const { return matched_ >= 0; }
  // Index into the constructor's list of the stop string that matched, -1 while not stopped.
  int matched_stop() const { return matched_; }

  // The output so far: everything fed, or, once stopped, the text before the stop string.
  std::string_view text() const { return text_; }

  // Bytes of text() that are final and may be streamed now. Held back while not stopped: a suffix
  // that could be the start of a stop string, and an unfinished UTF-8 character. Never decreases.
  // Once stopped it is text().size(). When generation ends without a stop (EOS, max_tokens) the
  // whole of text() is the output: what was held back was not a stop string after all.
  size_t safe_length() const;
  std::string_view safe_text() const { return text().substr(0, safe_length()); }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  // Earliest position where a stop string could still begin: the partial-match start. Everything
  // before it can never become part of a stop string, so searches start here.
  size_t hold_from_ = 0;
  int matched_ = -1;
};

}  // namespace ns::sampler
