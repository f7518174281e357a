// Generated text as it is stored and exported: a generation may stop in the
// middle of a character (max_tokens reached between the byte tokens of one
// character) or a model may emit byte sequences that are not UTF-8. The
// results table holds TEXT for people and SQLite browsers, so such bytes are
// replaced, as OpenAI-style servers do, instead of storing bytes that
// browsers, JSON encoders and Python's sqlite3 refuse (to_valid_utf8 in
// common/utf8.h; storable_text here also replaces NUL).
#pragma once

#include <string>
#include <string_view>

namespace ns::jobs {

// Generated text as both queue backends store it (results.text and every
// choice's text in results.choices): to_valid_utf8 (common/utf8.h: one
// U+FFFD per maximal invalid subpart), and each NUL byte as
// U+FFFD too. PostgreSQL's text and jsonb refuse U+0000 (SQLSTATE 22021 and
// 22P05), and SQLite browsers cut a TEXT value at it, so one rule serves both.
std::string storable_text(std::string_view text);

}  // namespace ns::jobs
