// Secrets out of text that names a database: the one function every place
// that prints, logs or stores a database URL goes through.
//
// Contract: redact_secrets(text) is `text` with every password replaced by
// "***", and nothing else changed:
// - a postgres:// or postgresql:// URI's userinfo password. The URI is
//   parsed, not pattern-matched: the userinfo ends at the LAST '@' before the
//   first '/' that follows the first '@' (so a password with '?', '/', ':' or
//   '@' in it is redacted whole: "u:S3cr?tPw/zz@host:5432/db" ->
//   "u:***@host:5432/db"); the password is everything after the userinfo's
//   first ':'. When in doubt it redacts more, never less.
// - a `password=` parameter of a URI's query (up to the next '&' or '#');
// - a `password=VALUE` pair of a libpq key=value conninfo string ("host=db
//   password='a b\' c'": quoted values to their closing quote).
// Text that is none of these (a SQLite path) comes back as it is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ns {

std::string redact_secrets(std::string_view text);
// The passwords redact_secrets would replace, as written (empty ones left
// out): to mask them where a library quotes them back in a message.
std::vector<std::string> secrets_in(std::string_view text);

}  // namespace ns
