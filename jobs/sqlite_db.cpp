#include "jobs/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>

#include "common/error.h"

namespace ns::jobs::sqlite {
namespace {

// What to do about the failures people actually hit.
std::string hint_for(int rc, int busy_timeout_ms) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "; another process held the database lock for longer than the busy timeout (" +
             std::to_string(busy_timeout_ms) + " ms): retry later, or find the process holding a transaction open";
    case SQLITE_CANTOPEN: return "; check that the directory exists and that this user may write to it";
    case SQLITE_READONLY:
      return "; the file or its directory is read-only (WAL mode must create the -wal and -shm files "
             "next to the database)";
    case SQLITE_NOTADB: return "; the file is not a SQLite database (wrong --db path?)";
    case SQLITE_CORRUPT: return "; the database file is damaged: restore a backup or run `sqlite3 FILE .recover`";
    case SQLITE_FULL:
      return "; the disk is full: free space on the filesystem holding the database (its -wal file grows too)";
    case SQLITE_IOERR:
      return "; the operating system reported an I/O error on the database file or its -wal/-shm files";
    default: return "";
  }
}

// Failures that may pass on their own: worth retrying with backoff.
bool is_transient(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR: return true;
    default: return false;
  }
}

std::string shorten(std::string_view sql) {
  constexpr size_t kMax = 200;
  std::string s(sql.substr(0, kMax));
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  if (sql.size() > kMax) s += "...";
  return s;
}

// A database file that does not exist yet is created here, empty and 0600
// (fchmod: the umask cannot widen or narrow it), before SQLite opens it:
// SQLite would create it 0644 under the usual umask. Memory databases and
// URIs are left to SQLite; a failure here is reported by the open that follows.
void create_private(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.starts_with("file:")) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;  // exists already (keeps its mode), or the open below names the problem
  (void)::fchmod(fd, 0600);
  ::close(fd);
}

}  // namespace

// ---- Db ---------------------------------------------------------------------

Db::Db(const std::string& path, const SqliteOptions& options) : path_(path), busy_timeout_ms_(options.busy_timeout_ms) {
  if (options.read_only) {
    open_read_only();
    return;
  }
  create_private(path);
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) raise_and_close(rc, "open");
  sqlite3_extended_result_codes(db_, 1);
  try {
    // busy_timeout first: switching to WAL takes a lock another process may hold.
    sqlite3_busy_timeout(db_, busy_timeout_ms_);
    exec("PRAGMA foreign_keys = ON");
    // Two processes creating the same file at once: the switch to WAL can
    // meet SQLITE_BUSY without the busy handler being consulted, so it is
    // retried here for as long as busy_timeout_ms allows.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
    for (;;) {
      try {
        Stmt wal(*this, "PRAGMA journal_mode = WAL");
        if (!wal.step() || wal.text(0) != "wal") {
          throw DatabaseError(false, "database " + path_ + ": cannot switch to WAL journal mode (got '" + wal.text(0) +
                                         "'); WAL needs a local filesystem, not NFS");
        }
        break;
      } catch (const DatabaseError& e) {
        if (!e.transient() || std::chrono::steady_clock::now() >= give_up) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    exec(options.synchronous == Synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Db::open_read_only() {
  // A URI so that "immutable" can be asked for; the path is percent-escaped where URIs need it.
  std::string uri = "file:";
  for (char c : path_) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
  for (const char* query : {"?mode=ro", "?mode=ro&immutable=1"}) {
    int rc = sqlite3_open_v2((uri + query).c_str(), &db_, flags, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_extended_result_codes(db_, 1);
      sqlite3_busy_timeout(db_, busy_timeout_ms_);
      // A WAL database without a -shm file it may create fails on the first read, not at open.
      rc = sqlite3_exec(db_, "PRAGMA query_only = ON; SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
    }
    if (std::string_view(query).find("immutable") != std::string_view::npos) {
      raise_and_close(rc, "open read-only");
    }
    sqlite3_close(db_);
    db_ = nullptr;
  }
}

Db::~Db() {
  cache_.clear();  // statements must be finalized before the connection closes
  if (db_ != nullptr) sqlite3_close(db_);
}

CachedStmt Db::cached(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it == cache_.end()) it = cache_.emplace(std::string(sql), std::make_unique<Stmt>(*this, sql)).first;
  return CachedStmt(*it->second);
}

void Db::raise_and_close(int rc, std::string_view what) {
  // Keep the handle long enough to read its message, then free it.
  try {
    raise(rc, what);
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Db::raise(int rc, std::string_view sql) const {
  const char* msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string what = "database " + path_ + ": " + msg + " (" + sqlite3_errstr(rc) + ", code " + std::to_string(rc);
  // The operating system's reason behind an I/O error: a full disk often
  // surfaces as SQLITE_IOERR (e.g. growing the -shm file), not SQLITE_FULL.
  const int os_errno = db_ != nullptr && (rc & 0xff) == SQLITE_IOERR ? sqlite3_system_errno(db_) : 0;
  if (os_errno != 0) what += std::string(", OS: ") + std::strerror(os_errno);
  what += ") in `" + shorten(sql) + "`" + hint_for(os_errno == ENOSPC ? SQLITE_FULL : rc, busy_timeout_ms_);
  throw DatabaseError(is_transient(rc), what);
}

std::string Db::integrity_problems(IntegrityCheck mode) {
  if (mode == IntegrityCheck::off) return "";
  std::string report;
  try {
    Stmt st(*this, mode == IntegrityCheck::full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)");
    while (st.step()) {
      const std::string line = st.text(0);
      if (line == "ok") continue;
      report += (report.empty() ? "" : "; ") + line;
    }
  } catch (const DatabaseError& e) {
    if (e.transient()) throw;  // locked or I/O: the check could not run, which says nothing about the file
    // Damage bad enough that the check itself stops is a finding too.
    report += (report.empty() ? "" : "; ") + std::string(sqlite3_errmsg(db_));
  }
  return report;
}

void Db::exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);  // sqlite3_errmsg(db_) still holds the message for raise()
  if (rc != SQLITE_OK) raise(rc, sql);
}

int64_t Db::scalar_int(std::string_view sql) {
  Stmt st(*this, sql);
  if (!st.step()) raise(SQLITE_MISUSE, sql);  // no row: the SQL is wrong, not the database
  return st.int64(0);
}

int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Db::changes() const { return sqlite3_changes(db_); }

// ---- Stmt -------------------------------------------------------------------

Stmt::Stmt(Db& db, std::string_view sql) : db_(db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db_.handle(), sql_.data(), static_cast<int>(sql_.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) db_.raise(rc, sql_);
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.raise(rc, sql_);
  return *this;
}

Stmt& Stmt::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) db_.raise(rc, sql_);
  return *this;
}

Stmt& Stmt::bind(int index, std::string_view text) {
  const int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) db_.raise(rc, sql_);
  return *this;
}

Stmt& Stmt::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_.raise(rc, sql_);
  return *this;
}

Stmt& Stmt::bind_text_or_null(int index, std::string_view text) {
  return text.empty() ? bind_null(index) : bind(index, text);
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.raise(rc, sql_);
}

void Stmt::run() {
  if (step()) {
    throw Error(ErrorKind::internal,
                "database " + db_.path() + ": `" + shorten(sql_) + "` returned rows where none were expected");
  }
}

void Stmt::reset() {
  // sqlite3_reset repeats the last step's error, already reported by step().
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Stmt::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

// ---- WriteTransaction -------------------------------------------------------

WriteTransaction::WriteTransaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

WriteTransaction::~WriteTransaction() {
  if (!open_) return;
  // A failed ROLLBACK (e.g. SQLite already rolled back after an error) leaves
  // nothing to undo; never throw from a destructor.
  sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTransaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace ns::jobs::sqlite
