// How jobs look to people and scripts: the `--json` objects of `nightshift
// list/show` and their human-readable forms. One place, so the CLI and the
// tests agree on field names.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::daemon {

// Every field of the job, its sampling parameters and (when present) its
// result with all stats. Times appear as epoch ms and ISO-8601 text; unset
// ones are null. Field names match the database columns.
nlohmann::json job_to_json(const jobs::Job& job);

// JSON text for output. Generated text may end inside a UTF-8 sequence (or
// be invalid UTF-8 from a bad model): such bytes become U+FFFD instead of
// making the output fail. indent < 0: one line.
std::string json_text(const nlohmann::json& value, int indent = -1);

// `s` with its control characters shown as text instead of acting on a
// terminal: C0 controls, DEL and the C1 range U+0080..U+009F become "\x1b"
// style escapes (a prompt holding ESC [ 2 J must not clear the screen of
// whoever lists the queue); newline and tab stay when keep_layout.
std::string escape_controls(std::string_view s, bool keep_layout);

// One line per job: id, state, model, batch/custom_id, priority, created (in
// local time: the table is for a person; --csv and --json keep UTC), tokens,
// tok/s and the start of the output (or the error). Control characters are
// always escaped (escape_controls), newlines and tabs shown as spaces.
std::string format_job_table(const std::vector<jobs::Job>& jobs);
// The same jobs as CSV (RFC 4180, a header line, every field quoted, CRLF):
// id, state, model, batch, custom_id, priority, created and finished (ISO
// 8601 UTC), token counts, decode tok/s, finish_reason, error, the full text.
std::string format_job_csv(const std::vector<jobs::Job>& jobs);

// Every field, the result's stats and the prompt (or messages) and output. With
// escape (`nightshift show` on a terminal) every text is escape_controls'ed,
// keeping newlines and tabs; without it, prompt and output are written as they are.
// With `cut`, a text above kShowWholeBytes is shown as its first kShowHeadBytes
// and last kShowTailBytes (on character boundaries) around a line saying how much
// is left out and `nightshift show ID --full` (an 88 KB prompt filled screens).
constexpr size_t kShowWholeBytes = 8192, kShowHeadBytes = 4096, kShowTailBytes = 1024;
std::string format_job_details(const jobs::Job& job, bool escape = false, bool cut = false);

// A job's claims and how each ended (`nightshift show`): a JSON array, and
// one line per attempt ("" when it never ran).
nlohmann::json attempts_to_json(const std::vector<jobs::AttemptRecord>& attempts);
std::string format_attempts(const std::vector<jobs::AttemptRecord>& attempts);

}  // namespace ns::daemon
