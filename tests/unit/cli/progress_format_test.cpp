// The small pieces progress displays are made of.
#include <doctest/doctest.h>

#include "daemon/lib/progress_format.h"
#include "daemon/cli/run_progress.h"

using namespace ns::cli;
using namespace ns::daemon;

TEST_CASE("progress bars fill in proportion and clamp") {
  CHECK(progress_bar(0, 10, 10) == "[----------]");
  CHECK(progress_bar(5, 10, 10) == "[#####-----]");
  CHECK(progress_bar(37, 200, 20) == "[###-----------------]");  // 3.7 cells: only whole ones are filled
  CHECK(progress_bar(10, 10, 4) == "[####]");
  CHECK(progress_bar(15, 10, 4) == "[####]");
  CHECK(progress_bar(-3, 10, 4) == "[----]");
  CHECK(progress_bar(3, 0, 4) == "[----]");  // an unknown total shows nothing done
}

TEST_CASE("durations: two units at most") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(-5) == "0s");
  CHECK(format_duration(0.4) == "0s");
  CHECK(format_duration(45) == "45s");
  CHECK(format_duration(59.6) == "1m00s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(3600 + 125) == "1h02m");
  CHECK(format_duration(2 * 86400 + 3 * 3600 + 59) == "2d03h");
}

TEST_CASE("ETA from tokens left and the rate") {
  CHECK(eta_seconds(37, 200, 3.26).value() == doctest::Approx(50.0));
  CHECK(eta_seconds(250, 200, 3).value() == 0);
  CHECK_FALSE(eta_seconds(1, 200, 0).has_value());
  CHECK_FALSE(eta_seconds(1, 200, -1).has_value());
  CHECK(format_rate(3.14159) == "3.14");
  CHECK(format_rate(0.31415) == "0.314");
  CHECK(ago(10'000, 10'000) == "just now");
  CHECK(ago(200'000, 15'000) == "3m05s ago");
}

TEST_CASE("run's progress line: prefill, then decode with the speed after the first token") {
  ns::GenerationProgress p;
  p.prompt_tokens = 4096;
  p.prefilled = 1024;
  CHECK(run_progress_text(p, 200, 2.0) ==
        "prefill [######------------------] 1024/4096 prompt tok, 512.00 tok/s, ETA 6s");
  p.prefilled = 4096;
  p.generated = 11;  // 10 tokens after the first, in 4 s
  CHECK(run_progress_text(p, 200, 4.0) == "decode  [#-----------------------] 11/200 tok, 2.50 tok/s, ETA 1m16s");
  p.generated = 1;
  CHECK(run_progress_text(p, 200, 0.0) == "decode  [------------------------] 1/200 tok");
}
