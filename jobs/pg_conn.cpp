#include "jobs/pg_conn.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/redact.h"
#include "jobs/valid_utf8.h"

namespace ns::jobs::pg {
namespace {

// SQLSTATE classes and codes where the same call may succeed later.
bool transient_code(std::string_view s) {
  if (s.size() != 5) return false;
  const std::string_view cls = s.substr(0, 2);
  return cls == "08"       // connection exception
         || cls == "53"    // insufficient resources: disk full, out of memory, too many connections
         || cls == "58"    // system error (I/O)
         || s == "40001"   // serialization_failure
         || s == "40P01"   // deadlock_detected
         || s == "55P03"   // lock_not_available (lock_timeout)
         || s == "57P01"   // admin_shutdown (server stopping or restarting)
         || s == "57P02"   // crash_shutdown
         || s == "57P03"   // cannot_connect_now (starting up)
         || s == "57014"   // query_canceled (statement_timeout)
         || s == "25P03";  // idle_in_transaction_session_timeout
}

// A failed connection attempt is transient unless the settings themselves
// are wrong (bad URL, unknown user or database, rejected password): those
// do not fix themselves by waiting.
bool transient_connect_failure(const std::string& message) {
  static const char* kPermanent[] = {"authentication failed",
                                     "does not exist",
                                     "no password supplied",
                                     "invalid connection option",
                                     "invalid URI",
                                     "invalid integer value",
                                     "invalid sslmode",
                                     "missing \"=\"",
                                     "unterminated quoted string",
                                     "no pg_hba.conf entry",
                                     "permission denied",
                                     "invalid percent-encoded token",  // a bad escape in the URL (the password?)
                                     "server does not support SSL, but SSL was required",
                                     "SSL is not supported by this build"};
  for (const char* p : kPermanent) {
    if (message.find(p) != std::string::npos) return false;
  }
  return true;
}

// libpq's message on one line: trailing newlines dropped, each inner line
// break (and the tab libpq indents hints with) folded into "; ", so a log
// entry stays one entry.
std::string trimmed(const char* s) {
  std::string in = s != nullptr ? s : "";
  while (!in.empty() && (in.back() == '\n' || in.back() == ' ')) in.pop_back();
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\n') {
      out += in[i];
      continue;
    }
    while (i + 1 < in.size() && (in[i + 1] == '\t' || in[i + 1] == ' ' || in[i + 1] == '\n')) ++i;
    out += "; ";
  }
  return out;
}

// libpq echoes parts of a bad connection string ("invalid percent-encoded
// token: \"<the password>\""), and where it splits a URL otherwise than
// nightshift does (a '/' in the password), a fragment of the password: a
// quoted token holding any piece of a password is masked whole, and any
// piece of three characters or more wherever it stands. The password never
// reaches a log.
std::string without_password(std::string message, const std::string& url) {
  for (const std::string& pw : secrets_in(url)) {
    std::vector<std::string> pieces{pw};
    for (size_t at = 0; at < pw.size();) {
      const size_t end = std::min(pw.find_first_of("?/@:&=#", at), pw.size());
      if (end > at && end - at < pw.size()) pieces.push_back(pw.substr(at, end - at));
      at = end + 1;
    }
    std::string out;
    for (size_t at = 0; at < message.size();) {
      const size_t open = message.find('"', at);
      const size_t close = open == std::string::npos ? std::string::npos : message.find('"', open + 1);
      if (close == std::string::npos) {
        out.append(message, at, std::string::npos);
        break;
      }
      const std::string_view quoted(message.data() + open + 1, close - open - 1);
      const bool holds = std::any_of(pieces.begin(), pieces.end(),
                                     [&](const std::string& p) { return quoted.find(p) != std::string_view::npos; });
      out.append(message, at, open - at);
      out += holds ? std::string("\"***\"") : std::string(message, open, close - open + 1);
      at = close + 1;
    }
    message = std::move(out);
    for (const std::string& piece : pieces) {
      if (piece.size() < 3) continue;  // a short one would match ordinary words
      for (size_t at = message.find(piece); at != std::string::npos; at = message.find(piece, at + 3))
        message.replace(at, piece.size(), "***");
    }
  }
  return redact_secrets(message);
}

// The first line of `sql`, shortened: enough to recognise the statement.
std::string sql_excerpt(std::string_view sql) {
  size_t start = sql.find_first_not_of(" \n\t");
  if (start == std::string_view::npos) return "";
  std::string s(sql.substr(start, 160));
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  if (sql.size() - start > 160) s += "...";
  return s;
}

template <class T>
T parse_number(const char* s, int len) {
  T v{};
  std::from_chars(s, s + len, v);
  return v;
}

// The password alone, from its file's first line (PgOptions::password_file). Anything a group or others may
// access is refused, as libpq refuses such a PGPASSFILE: a secret others can read is no longer one.
std::string read_password_file(const std::string& path, const std::string& db) {
  const std::string where = "database " + db + ": password_file " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DatabaseError(false, where + ": cannot open it: " + std::strerror(errno));
  struct stat st {};
  std::string text;
  const bool ok = ::fstat(fd, &st) == 0;
  if (ok && S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)) == 0) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < 65536) text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!ok || !S_ISREG(st.st_mode)) throw DatabaseError(false, where + " is not a regular file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw DatabaseError(false, where + " may be read by its group or others (mode " + mode +
                                   "); make it the "
                                   "daemon user's alone: chmod 600 " +
                                   path);
  }
  text = text.substr(0, text.find_first_of("\r\n"));
  if (text.empty()) throw DatabaseError(false, where + " is empty; write the password on its first line");
  return text;
}
}  // namespace

bool transient_sqlstate(std::string_view sqlstate) { return transient_code(sqlstate); }

// ---- Params -------------------------------------------------------------------

Params& Params::add(int64_t v) { return add_raw(std::to_string(v)); }

Params& Params::add(double v) {
  char buf[64];
  // %.17g round-trips every double; PostgreSQL parses it exactly.
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return add_raw(buf);
}

Params& Params::add(bool v) { return add_raw(v ? "t" : "f"); }

Params& Params::add(std::string_view v) { return add_raw(storable_text(v)); }

Params& Params::add_null() {
  values_.emplace_back(std::nullopt);
  return *this;
}

Params& Params::add_text_or_null(std::string_view v) { return v.empty() ? add_null() : add(v); }

Params& Params::add_or_null(int64_t v) { return v == 0 ? add_null() : add(v); }

Params& Params::add_raw(std::string v) {
  values_.emplace_back(std::move(v));
  return *this;
}

const char* const* Params::pointers() const {
  pointers_.clear();
  for (const auto& v : values_) pointers_.push_back(v ? v->c_str() : nullptr);
  return pointers_.data();
}

// ---- Result -------------------------------------------------------------------

Result::~Result() {
  if (r_ != nullptr) PQclear(r_);
}

Result& Result::operator=(Result&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}

int Result::rows() const { return PQntuples(r_); }

int Result::columns() const { return PQnfields(r_); }

std::string Result::command() const { return PQcmdStatus(r_); }

std::string Result::column_name(int col) const { return PQfname(r_, col); }

int64_t Result::affected() const {
  const char* n = PQcmdTuples(r_);
  return n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
}

bool Result::is_null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }

std::string Result::text(int row, int col) const {
  if (is_null(row, col)) return "";
  return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
}

int64_t Result::int64(int row, int col) const {
  if (is_null(row, col)) return 0;
  return parse_number<int64_t>(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
}

double Result::real(int row, int col) const {
  if (is_null(row, col)) return 0;
  // strtod, not from_chars: it also reads PostgreSQL's "Infinity" and "NaN".
  return std::strtod(PQgetvalue(r_, row, col), nullptr);
}

bool Result::boolean(int row, int col) const { return !is_null(row, col) && PQgetvalue(r_, row, col)[0] == 't'; }

std::vector<int64_t> Result::int_array(int row, int col) const {
  std::vector<int64_t> out;
  if (is_null(row, col)) return out;
  const char* s = PQgetvalue(r_, row, col);
  const char* end = s + PQgetlength(r_, row, col);
  while (s < end) {
    if (*s == '-' || (*s >= '0' && *s <= '9')) {
      int64_t v = 0;
      const auto [next, ec] = std::from_chars(s, end, v);
      if (ec != std::errc()) break;
      out.push_back(v);
      s = next;
    } else {
      ++s;  // '{', ',', '}'
    }
  }
  return out;
}

// ---- Conn ---------------------------------------------------------------------

Conn::Conn(std::string url, PgOptions options)
    : url_(std::move(url)), options_(std::move(options)), name_(redact_secrets(url_)) {
  connect();
}

Conn::~Conn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

void Conn::connect() {
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  in_transaction_ = false;
  // Defaults first: settings in the URL come later and override them.
  // The password file's secret comes last, so it wins over the URL's; it goes to libpq only, never to a message.
  const std::string password = options_.password_file.empty() ? "" : read_password_file(options_.password_file, name_);
  const char* keys[] = {"connect_timeout",
                        "application_name",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "client_encoding",
                        "dbname",
                        password.empty() ? nullptr : "password",
                        nullptr};
  const char* values[] = {"10", "nightshift", "30", "10", "3", "UTF8", url_.c_str(), password.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr) throw DatabaseError(true, "database " + name_ + ": out of memory while connecting");
  if (PQstatus(conn_) != CONNECTION_OK) {
    const std::string message = without_password(trimmed(PQerrorMessage(conn_)), url_);
    PQfinish(conn_);
    conn_ = nullptr;
    const bool transient = transient_connect_failure(message);
    throw DatabaseError(transient, "database " + name_ + ": cannot connect: " + message +
                                       (transient ? " (will retry)"
                                                  : "; check the URL, the user, its password and that the "
                                                    "database exists (createdb)"));
  }
  // A lock wait that long means something is stuck: fail (transiently) and
  // retry rather than hang the daemon; never leave a crashed client's
  // transaction holding row locks for long.
  PGresult* r = PQexec(conn_,
                       "SET lock_timeout = '30s'; SET idle_in_transaction_session_timeout = '120s'; "
                       "SET client_min_messages = warning");
  const bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) raise(r, "SET lock_timeout ...");
  PQclear(r);
}

bool Conn::connection_ok() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

void Conn::ensure_connected(std::string_view sql) {
  if (connection_ok()) return;
  // Never carry on a transaction's statements (or its COMMIT) on a new
  // connection: the server rolled the first ones back with the old one.
  // (in_transaction_ stays set until the Transaction object ends.)
  if (in_transaction_) {
    throw DatabaseError(true, "database " + name_ +
                                  ": the connection was lost in the middle of a transaction, which the server "
                                  "rolled back (the next call reconnects) in: " +
                                  sql_excerpt(sql));
  }
  connect();
}

// A server stopped with `-m immediate` cuts its connections without a word:
// libpq then reports "server closed the connection unexpectedly" with no
// SQLSTATE while PQstatus may still say OK (a fault run's daemon exited on it,
// taking it as permanent). Probe the socket; drop a dead connection so the
// next call reconnects.
bool Conn::drop_if_dead() {
  if (PQsocket(conn_) >= 0 && PQconsumeInput(conn_) == 1 && PQstatus(conn_) == CONNECTION_OK) return false;
  PQfinish(conn_);
  conn_ = nullptr;
  return true;
}

void Conn::raise(pg_result* r, std::string_view sql) {
  std::string message;
  std::string state;
  if (r != nullptr) {
    message = trimmed(PQresultErrorMessage(r));
    if (const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE); s != nullptr) state = s;
  }
  if (message.empty() && conn_ != nullptr) message = trimmed(PQerrorMessage(conn_));
  if (r != nullptr) PQclear(r);
  const bool lost = !connection_ok() || (state.empty() && drop_if_dead());
  const bool transient = lost || transient_code(state);
  std::string what = "database " + name_ + ": " + (message.empty() ? "unknown error" : message);
  if (!state.empty()) what += " (SQLSTATE " + state + ")";
  if (lost) what += " (connection lost; the next call reconnects)";
  what += " in: " + sql_excerpt(sql);
  throw DatabaseError(transient, what);
}

Result Conn::run(std::string_view sql, const Params& params, bool retry_if_reconnected) {
  const bool was_connected = connection_ok();
  ensure_connected(sql);
  const std::string text(sql);
  PGresult* r = PQexecParams(conn_, text.c_str(), params.size(), nullptr, params.pointers(), nullptr, nullptr, 0);
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Result(r);
  // The connection died while idle (server restarted, idle timeout, network
  // blip): nothing was done, so a statement outside a transaction can run
  // again on a new connection.
  if (retry_if_reconnected && was_connected && !connection_ok()) {
    if (r != nullptr) PQclear(r);
    connect();
    return run(sql, params, false);
  }
  raise(r, sql);
}

Result Conn::exec(std::string_view sql, const Params& params) {
  // Outside a transaction each statement commits on its own: only reads are
  // run that way by the queue, so running one again is harmless.
  return run(sql, params, !in_transaction_);
}

void Conn::exec_script(std::string_view sql) {
  ensure_connected(sql);
  const std::string text(sql);
  PGresult* r = PQexec(conn_, text.c_str());
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) raise(r, sql);
  PQclear(r);
}

// ---- Transaction --------------------------------------------------------------

Transaction::Transaction(Conn& conn) : conn_(conn) {
  // BEGIN on a connection that died while idle is retried on a new one.
  conn_.run("BEGIN", {}, true);
  conn_.in_transaction_ = true;
}

Transaction::~Transaction() {
  if (!open_) return;
  conn_.in_transaction_ = false;
  if (!conn_.connection_ok()) return;  // the server has rolled it back already
  PGresult* r = PQexec(conn_.conn_, "ROLLBACK");
  if (r != nullptr) PQclear(r);  // never throw from a destructor; a broken connection shows on the next call
}

void Transaction::commit() {
  open_ = false;
  std::string status;
  try {
    // in_transaction_ is still set: a lost connection cannot "commit" on a new one.
    status = conn_.run("COMMIT", {}, false).command();
  } catch (...) {
    conn_.in_transaction_ = false;  // a failed COMMIT ends the transaction too (rolled back)
    throw;
  }
  conn_.in_transaction_ = false;
  // COMMIT of a transaction an earlier statement aborted answers ROLLBACK, without an error.
  if (status != "COMMIT") {
    throw DatabaseError(false, "database " + conn_.name() + ": the transaction was rolled back (COMMIT answered " +
                                   status + ") after an earlier statement of it failed; nothing was written");
  }
}

}  // namespace ns::jobs::pg
