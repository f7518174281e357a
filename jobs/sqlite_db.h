// A thin RAII layer over the SQLite C API for the queue backend.
//
// Contract: every failure throws jobs::DatabaseError (an ns::Error of kind
// database) whose message names the database file, SQLite's own message and
// code, and the SQL that failed; transient() for BUSY, LOCKED, FULL and
// IOERR (worth retrying later). Objects are used from one thread (the connection is opened with
// SQLITE_OPEN_NOMUTEX); several connections and processes may share one file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ns::jobs::sqlite {

class Db;

// One prepared statement. Bind indexes are 1-based, column indexes 0-based
// (as in SQLite). step() returns true while there is a row to read.
class Stmt {
 public:
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int index, int64_t value);
  Stmt& bind(int index, double value);
  Stmt& bind(int index, std::string_view text);
  Stmt& bind_null(int index);
  // Empty text binds NULL (used for optional text columns such as the idempotency key).
  Stmt& bind_text_or_null(int index, std::string_view text);

  bool step();
  // Steps once more and throws unless the statement is done (for writes).
  void run();
  // Back to the start with no bindings, ready to run again.
  void reset();

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;  // "" for NULL

 private:
  Db& db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// A statement from Db::cached(), reset when the lease ends so it never keeps
// a read snapshot open (which would stall WAL checkpoints).
class CachedStmt {
 public:
  explicit CachedStmt(Stmt& stmt) : stmt_(&stmt) {}
  ~CachedStmt() { stmt_->reset(); }
  CachedStmt(const CachedStmt&) = delete;
  CachedStmt& operator=(const CachedStmt&) = delete;
  Stmt* operator->() const { return stmt_; }
  Stmt& operator*() const { return *stmt_; }

 private:
  Stmt* stmt_;
};

class Db {
 public:
  // Opens (creating if needed) the file, then: busy_timeout, foreign keys
  // on, WAL journal, synchronous (see SqliteOptions in jobs/queue.h). A new
  // file is created 0600 whatever the umask (results may be private; the
  // -wal and -shm files take the database's mode); an existing file keeps
  // its mode, so `chmod 0660` makes it group-writable for good.
  // options.read_only: opened read-only instead (nothing created or changed).
  explicit Db(const std::string& path, const SqliteOptions& options = {});
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements that return no rows of interest.
  void exec(std::string_view sql);
  // The statement for `sql`, prepared on first use and kept for the life of
  // the connection (the queue runs the same few statements thousands of times).
  // One lease per SQL text at a time.
  CachedStmt cached(std::string_view sql);
  int64_t scalar_int(std::string_view sql);
  int64_t last_insert_rowid() const;
  int changes() const;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  // Throws DatabaseError for result code `rc` while running `sql`.
  [[noreturn]] void raise(int rc, std::string_view sql) const;

  // "" when the check passes (or is off), else SQLite's report (first lines).
  std::string integrity_problems(IntegrityCheck mode);

 private:
  void open_read_only();
  // raise() for a failed open, then the handle closed.
  [[noreturn]] void raise_and_close(int rc, std::string_view what);

  std::string path_;
  int busy_timeout_ms_ = 0;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Stmt>> cache_;
};

// BEGIN IMMEDIATE on construction: takes the write lock up front so two
// writers never deadlock upgrading read locks. Rolls back unless commit() ran.
class WriteTransaction {
 public:
  explicit WriteTransaction(Db& db);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

}  // namespace ns::jobs::sqlite
