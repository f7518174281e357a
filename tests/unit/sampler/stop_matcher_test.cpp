// StopMatcher: stops across token boundaries, holds back possible starts of a stop string
// and unfinished UTF-8, and agrees with a brute-force reference on random streams.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/sampler/stop_matcher.h"
#include "common/error.h"

using ns::sampler::StopMatcher;

TEST_CASE("a stop string split across pieces is found and excluded; its start is held back meanwhile") {
  StopMatcher m({"###"});
  CHECK_FALSE(m.feed("Hello #"));
  CHECK(m.safe_text() == "Hello ");
  CHECK(m.text() == "Hello #");
  CHECK_FALSE(m.feed("#"));
  CHECK(m.safe_text() == "Hello ");
  CHECK(m.feed("# world"));
  CHECK(m.stopped());
  CHECK(m.matched_stop() == 0);
  CHECK(m.text() == "Hello ");
  CHECK(m.safe_text() == "Hello ");
}

TEST_CASE("held-back text is released when it turns out not to be a stop string") {
  StopMatcher m({"###"});
  m.feed("ab##");
  CHECK(m.safe_text() == "ab");
  m.feed("x");
  CHECK(m.safe_text() == "ab##x");
  CHECK_FALSE(m.stopped());
}

TEST_CASE("a stop string at the very start leaves no output") {
  StopMatcher m({"</s>"});
  CHECK(m.feed("</s>more"));
  CHECK(m.text() == "");
  CHECK(m.safe_length() == 0);

  StopMatcher split({"</s>"});
  split.feed("<");
  CHECK(split.safe_length() == 0);
  split.feed("/");
  split.feed("s>");
  CHECK(split.stopped());
  CHECK(split.text() == "");
}

TEST_CASE("several stop strings: the one that appears stops, and its index is reported") {
  StopMatcher m({"STOP", "\n\n"});
  m.feed("line\n");
  CHECK(m.safe_text() == "line");
  CHECK(m.feed("\nmore"));
  CHECK(m.matched_stop() == 1);
  CHECK(m.text() == "line");
}

TEST_CASE("the earliest occurrence wins, whichever stop string it is") {
  StopMatcher one_piece({"bc", "abcd"});
  one_piece.feed("xabcdy");  // both appear in this piece; "abcd" starts first
  CHECK(one_piece.matched_stop() == 1);
  CHECK(one_piece.text() == "x");

  StopMatcher bytewise({"abcd", "bc"});  // "bc" completes while "abcd" is still partial
  for (char c : std::string("abcd")) bytewise.feed(std::string(1, c));
  CHECK(bytewise.matched_stop() == 1);
  CHECK(bytewise.text() == "a");
}

TEST_CASE("a stop string that overlaps itself is found after a false start") {
  StopMatcher m({"aab"});
  for (char c : std::string("xaaa")) m.feed(std::string(1, c));
  CHECK(m.safe_text() == "xa");  // "aa" could still become "aab"
  m.feed("b");
  CHECK(m.stopped());
  CHECK(m.text() == "xa");
}

TEST_CASE("multi-byte UTF-8 stop strings and unfinished characters") {
  const std::string full_stop = "\xE3\x80\x82";  // 。
  StopMatcher m({full_stop});
  m.feed("\xE4\xBD\xA0\xE5\xA5");          // 你 and two bytes of 好
  CHECK(m.safe_text() == "\xE4\xBD\xA0");  // never half a character
  m.feed("\xBD\xE3\x80");
  CHECK(m.safe_text() == "\xE4\xBD\xA0\xE5\xA5\xBD");
  CHECK(m.feed("\x82"));
  CHECK(m.text() == "\xE4\xBD\xA0\xE5\xA5\xBD");

  StopMatcher none({});
  none.feed("caf\xC3");
  CHECK(none.safe_text() == "caf");
  none.feed("\xA9!");
  CHECK(none.safe_text() == "caf\xC3\xA9!");
  none.feed(
      "\xFF"
      "ok");  // an invalid byte is passed through, not waited on forever
  CHECK(none.safe_length() == none.text().size());
}

TEST_CASE("pieces after a stop are ignored") {
  StopMatcher m({"END"});
  m.feed("done END");
  CHECK(m.feed("and more"));
  CHECK(m.text() == "done ");
}

TEST_CASE("an empty stop string is rejected") { CHECK_THROWS_AS(StopMatcher({"ok", ""}), ns::Error); }

TEST_CASE("random streams agree with a brute-force reference; safe text only grows and is final") {
  const std::vector<std::string> stops = {"abc", "cab", "bb", "\xC3\xA9x"};
  const std::vector<std::string> alphabet = {"a", "b", "c", "x", "\xC3", "\xA9", "\xC3\xA9"};
  std::mt19937 gen(17);
  int stopped_streams = 0;
  for (int stream = 0; stream < 500; ++stream) {
    StopMatcher m(stops);
    std::string fed;       // everything fed so far
    std::string expected;  // the reference's output
    int expected_stop = -1;
    std::string previous_safe;
    const int pieces = 1 + static_cast<int>(gen() % 12);
    for (int i = 0; i < pieces && expected_stop < 0; ++i) {
      std::string piece;
      for (int n = static_cast<int>(gen() % 4); n >= 0; --n) piece += alphabet[gen() % alphabet.size()];
      fed += piece;
      m.feed(piece);
      // Reference: the earliest start of any stop string in all text fed so far.
      for (size_t pos = 0; pos < fed.size() && expected_stop < 0; ++pos)
        for (size_t s = 0; s < stops.size(); ++s)
          if (fed.compare(pos, stops[s].size(), stops[s]) == 0) {
            expected_stop = static_cast<int>(s);
            expected = fed.substr(0, pos);
            break;
          }
      const std::string safe(m.safe_text());
      REQUIRE(safe.compare(0, previous_safe.size(), previous_safe) == 0);  // grows only
      REQUIRE(fed.compare(0, safe.size(), safe) == 0);
      previous_safe = safe;
    }
    CAPTURE(fed);
    REQUIRE(m.matched_stop() == expected_stop);
    if (expected_stop >= 0) {
      ++stopped_streams;
      REQUIRE(m.text() == expected);
    } else {
      REQUIRE(m.text() == fed);
    }
    // Whatever was declared safe is part of the final output.
    REQUIRE(std::string(m.text()).compare(0, previous_safe.size(), previous_safe) == 0);
  }
  CHECK(stopped_streams > 50);
  CHECK(stopped_streams < 450);
}
