// What `nightshift list/show` print: the JSON fields scripts rely on and the
// human table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <string>

#include "daemon/lib/job_format.h"
#include "jobs/time_format.h"
#include "common/utf8.h"

using namespace ns;

namespace {

jobs::Job done_job() {
  jobs::Job j;
  j.id = 42;
  j.spec.model = "tiny";
  j.spec.prompt = "Once upon a time";
  j.spec.sampling.seed = 0xfedcba9876543210ULL;
  j.spec.sampling.stop = {"\n\n"};
  j.spec.priority = 3;
  j.state = jobs::JobState::done;
  j.created_ms = 1738361109123;
  j.started_ms = 1738361110000;
  j.finished_ms = 1738361111000;
  j.worker = "host:1";
  j.attempts = 1;
  jobs::JobResult r{.text = "there was a kingdom\nby the sea, and in it lived a queen who could count to a million",
                    .finish_reason = "length",
                    .prompt_tokens = 5,
                    .completion_tokens = 20,
                    .queue_wait_ms = 877,
                    .decode_tok_s = 12.345,
                    .peak_rss_bytes = 1 << 20,
                    .bytes_read = 3 << 20};
  j.result = r;
  return j;
}

}  // namespace

TEST_CASE("job_to_json carries every field, null for what has not happened") {
  const nlohmann::json j = daemon::job_to_json(done_job());
  CHECK(j["id"] == 42);
  CHECK(j["state"] == "done");
  CHECK(j["model"] == "tiny");
  CHECK(j["prompt"] == "Once upon a time");
  CHECK(j["priority"] == 3);
  CHECK(j["sampling"]["seed"].get<uint64_t>() == 0xfedcba9876543210ULL);
  CHECK(j["sampling"]["stop"] == nlohmann::json::array({"\n\n"}));
  CHECK(j["sampling"]["max_tokens"] == 128);
  CHECK(j["created_ms"] == 1738361109123);
  CHECK(j["created_at"] == "2025-01-31T22:05:09.123Z");
  CHECK(j["idempotency_key"].is_null());
  CHECK(j["error"].is_null());
  CHECK(j["result"]["completion_tokens"] == 20);
  CHECK(j["result"]["queue_wait_ms"] == 877.0);
  CHECK(j["result"]["decode_tok_s"] == 12.345);
  CHECK(j["result"]["bytes_read"] == 3 << 20);
  CHECK(j["result"]["finish_reason"] == "length");

  jobs::Job queued;
  queued.id = 1;
  queued.spec.model = "m";
  queued.created_ms = 5;
  const nlohmann::json q = daemon::job_to_json(queued);
  CHECK(q["state"] == "queued");
  CHECK(q["started_ms"].is_null());
  CHECK(q["finished_at"].is_null());
  CHECK(q["worker"].is_null());
  CHECK(q["result"].is_null());
}

TEST_CASE("json_text replaces invalid UTF-8 rather than failing") {
  jobs::Job j = done_job();
  j.result->text = std::string("ends mid-character \xe4\xb8");
  const std::string text = daemon::json_text(daemon::job_to_json(j));
  CHECK(text.find("ends mid-character \xef\xbf\xbd") != std::string::npos);  // U+FFFD
  CHECK(nlohmann::json::parse(text)["id"] == 42);
}

TEST_CASE("the job table shows one aligned line per job") {
  jobs::Job failed;
  failed.id = 7;
  failed.spec.model = "mixtral-8x7b";
  failed.state = jobs::JobState::failed;
  failed.created_ms = 1738361109123;
  failed.error_kind = "bad_model";
  failed.error = "truncated";
  jobs::Job running;
  running.id = 8;
  running.spec.model = "tiny";
  running.spec.prompt = "Ünïcode prompt that is rather long, longer than the preview allows for sure";
  running.state = jobs::JobState::running;
  running.cancel_requested = true;

  failed.spec.batch = "nightly";
  failed.spec.custom_id = "req-7";

  // Local time in the table (TZ as a POSIX rule: UTC+1, no tz database needed); UTC in the CSV.
  const char* tz = std::getenv("TZ");
  const std::string saved_tz = tz ? tz : "";
  setenv("TZ", "CET-1", 1);
  tzset();
  const std::string table = daemon::format_job_table({running, failed, done_job()});
  const std::string csv = daemon::format_job_csv({failed});
  if (tz)
    setenv("TZ", saved_tz.c_str(), 1);
  else
    unsetenv("TZ");
  tzset();
  // header + 3 rows
  CHECK(std::count(table.begin(), table.end(), '\n') == 4);
  CHECK(table.find("ID  STATE") == 0);
  CHECK(table.find("BATCH/CUSTOM_ID") != std::string::npos);
  CHECK(table.find("CREATED (local)") != std::string::npos);
  CHECK(table.find("nightly/req-7") != std::string::npos);
  CHECK(table.find("bad_model: truncated") != std::string::npos);
  CHECK(table.find("running*") != std::string::npos);  // cancel pending
  CHECK(table.find("2025-01-31 23:05:09") != std::string::npos);
  CHECK(table.find("22:05:09") == std::string::npos);
  CHECK(csv.find("2025-01-31T22:05:09.123Z") != std::string::npos);
  CHECK(table.find("12.35") != std::string::npos);                           // tok/s
  CHECK(table.find("there was a kingdom by the sea") != std::string::npos);  // newline flattened
  CHECK(table.find("> Ünïcode prompt that is rather long, lo...") != std::string::npos);
  // The STATE column starts at the same offset on every line.
  size_t pos = 0;
  size_t state_col = std::string::npos;
  while (pos < table.size()) {
    const size_t eol = table.find('\n', pos);
    const std::string line = table.substr(pos, eol - pos);
    const size_t col = line.find_first_not_of(' ', line.find(' '));
    if (state_col == std::string::npos) state_col = col;
    CHECK(col == state_col);
    pos = eol + 1;
  }
}

TEST_CASE("show's details include the stats and the full output") {
  const std::string text = daemon::format_job_details(done_job());
  CHECK(text.find("job 42: done") == 0);
  CHECK(text.find("queue_wait       877 ms") != std::string::npos);
  CHECK(text.find("12.35 tok/s") != std::string::npos);
  CHECK(text.find("1.0 MiB") != std::string::npos);
  CHECK(text.find("seed=18364758544493064720") != std::string::npos);
  CHECK(text.find("--- output ---\nthere was a kingdom\nby the sea") != std::string::npos);
}

TEST_CASE("lease, retry and attempt fields appear in the JSON and in show's details") {
  jobs::Job j = done_job();
  j.state = jobs::JobState::queued;
  j.attempt = 2;
  j.attempts = 2;
  j.spec.max_attempts = 3;
  j.spec.not_before_ms = 1738361112000;
  j.error_kind = "io";
  j.error = "read failed";
  j.result.reset();
  const nlohmann::json json = daemon::job_to_json(j);
  CHECK(json["attempt"] == 2);
  CHECK(json["max_attempts"] == 3);
  CHECK(json["not_before_at"] == "2025-01-31T22:05:12.000Z");
  CHECK(json["lease_expires_ms"].is_null());
  const std::string text = daemon::format_job_details(j);
  CHECK(text.find("attempts         2 of at most 3 (latest claim #2)") != std::string::npos);
  CHECK(text.find("not_before       2025-01-31T22:05:12.000Z") != std::string::npos);
  CHECK(text.find("last_error       io: read failed") != std::string::npos);

  jobs::Job dead = j;
  dead.state = jobs::JobState::dead;
  CHECK(daemon::format_job_table({dead}).find("io: read failed") != std::string::npos);
}

TEST_CASE("the attempt history: one JSON object and one line per attempt") {
  jobs::AttemptRecord crashed;
  crashed.attempt = 1;
  crashed.worker = "host:1";
  crashed.started_ms = 1738361109123;
  crashed.ended_ms = 1738361169123;
  crashed.outcome = "lease_expired";
  crashed.error_kind = "lease_expired";
  crashed.error = "worker host:1 stopped renewing its lease";
  jobs::AttemptRecord resumed;
  resumed.attempt = 2;
  resumed.worker = "host:2";
  resumed.started_ms = 1738361170000;
  resumed.resumed_tokens = 96;
  const nlohmann::json json = daemon::attempts_to_json({crashed, resumed});
  REQUIRE(json.size() == 2);
  CHECK(json[0]["outcome"] == "lease_expired");
  CHECK(json[0]["ended_at"] == "2025-01-31T22:06:09.123Z");
  CHECK(json[1]["outcome"].is_null());  // still running
  CHECK(json[1]["resumed_tokens"] == 96);
  const std::string lines = daemon::format_attempts({crashed, resumed});
  CHECK(lines.find("--- attempts ---\n") == 0);
  CHECK(
      lines.find("#1 host:1 2025-01-31 22:05:09 -> 2025-01-31 22:06:09 lease_expired: lease_expired: worker host:1") !=
      std::string::npos);
  CHECK(lines.find("#2 host:2 2025-01-31 22:06:10 -> - running (resumed at token 96)") != std::string::npos);
  CHECK(daemon::format_attempts({}).empty());
}

TEST_CASE("list and show escape terminal control sequences from prompts and outputs") {
  CHECK(daemon::escape_controls("a\x1b[2Jb\x07", false) == "a\\x1b[2Jb\\x07");
  CHECK(daemon::escape_controls("line\n\tindent\r", true) == "line\n\tindent\\x0d");
  CHECK(daemon::escape_controls("line\n", false) == "line\\x0a");
  CHECK(daemon::escape_controls("csi \xc2\x9b"
                                "31m, del \x7f, caf\xc3\xa9",
                                false) == "csi \\x9b31m, del \\x7f, caf\xc3\xa9");

  jobs::Job j = done_job();
  j.spec.prompt = "clear \x1b[2J the screen";
  j.result->text = "ring\x07 the \x1b]0;title\x07 bell\nsecond line";
  j.state = jobs::JobState::queued;
  std::string table = daemon::format_job_table({j});
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(table.find("clear \\x1b[2J the screen") != std::string::npos);
  j.state = jobs::JobState::done;
  table = daemon::format_job_table({j});
  CHECK(table.find('\x07') == std::string::npos);
  CHECK(table.find("ring\\x07 the") != std::string::npos);

  const std::string shown = daemon::format_job_details(j, /*escape=*/true);
  CHECK(shown.find('\x1b') == std::string::npos);
  CHECK(shown.find('\x07') == std::string::npos);
  CHECK(shown.find("clear \\x1b[2J the screen\n") != std::string::npos);
  CHECK(shown.find(" bell\nsecond line") != std::string::npos);  // newlines kept
  const std::string raw = daemon::format_job_details(j, /*escape=*/false);
  CHECK(raw.find("clear \x1b[2J the screen\n") != std::string::npos);  // into a pipe: as it is
}

TEST_CASE("format_job_csv: a header, every field quoted, quotes doubled, the full text with its line breaks") {
  ns::jobs::Job j;
  j.id = 7;
  j.state = ns::jobs::JobState::done;
  j.spec.model = "kimi";
  j.spec.batch = "nightly";
  j.spec.custom_id = "notes/a.md@1f";
  j.created_ms = 1764547200000;  // 2025-12-01T00:00:00Z
  ns::jobs::JobResult r{.text = "He said \"no\",\nthen left.",
                        .finish_reason = "stop",
                        .prompt_tokens = 5,
                        .completion_tokens = 9,
                        .decode_tok_s = 12.345};
  j.result = r;
  const std::string csv = ns::daemon::format_job_csv({j});
  CHECK(csv ==
        "id,state,model,batch,custom_id,priority,created,finished,prompt_tokens,completion_tokens,"
        "decode_tok_s,finish_reason,error_kind,error,text\r\n"
        "\"7\",\"done\",\"kimi\",\"nightly\",\"notes/a.md@1f\",\"0\",\"2025-12-01T00:00:00.000Z\",\"\",\"5\","
        "\"9\",\"12.35\",\"stop\",\"\",\"\",\"He said \"\"no\"\",\nthen left.\"\r\n");
}

// Issue #30 M: the model column was printed as it was stored.
TEST_CASE("list escapes terminal controls in the model column") {
  jobs::Job j = done_job();
  j.spec.model =
      "tiny\x1b[2J\xc2\x9b"
      "31m";
  const std::string table = daemon::format_job_table({j});
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(table.find("\xc2\x9b") == std::string::npos);
  CHECK(table.find("tiny\\x1b[2J\\x9b31m") != std::string::npos);
}

// #31: `show` printed an 88 KB prompt whole; it now shows its head and tail around a note naming --full.
TEST_CASE("show cuts a long prompt and output around a note, whole with --full") {
  jobs::Job j = done_job();
  std::string prompt;
  while (prompt.size() < 88 * 1024) prompt += "line " + std::to_string(prompt.size()) + " \xC3\xA9t\xC3\xA9\n";
  j.spec.prompt = prompt;
  j.result->text = std::string(20000, 'o') + "END";
  const std::string cut = daemon::format_job_details(j, false, true);
  CHECK(cut.size() < 16 * 1024);
  CHECK(cut.find(prompt.substr(0, 200)) != std::string::npos);               // the head
  CHECK(cut.find(prompt.substr(prompt.size() - 200)) != std::string::npos);  // the tail
  CHECK(cut.find("of the prompt's " + std::to_string(prompt.size()) +
                 " bytes not shown; all of it: nightshift show 42 "
                 "--full") != std::string::npos);
  CHECK(cut.find("of the output's 20003 bytes not shown") != std::string::npos);
  CHECK(cut.find("ooEND") != std::string::npos);
  // Cut on character boundaries: the text stays valid UTF-8 around the note.
  CHECK(to_valid_utf8(cut) == cut);
  const std::string whole = daemon::format_job_details(j, false, false);
  CHECK(whole.find(prompt) != std::string::npos);
  CHECK(whole.find("not shown") == std::string::npos);
  // A short prompt is never cut.
  CHECK(daemon::format_job_details(done_job(), false, true) == daemon::format_job_details(done_job()));
}
