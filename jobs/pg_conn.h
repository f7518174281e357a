// A thin RAII layer over libpq for the PostgreSQL queue backend.
//
// Contract: every failure throws jobs::DatabaseError whose message names the
// database (its URL with any password hidden), the server's message and
// SQLSTATE, and the SQL that failed. transient() when trying again later may
// succeed: the connection was lost or cannot be made (server down,
// restarting, unreachable), serialization failure, deadlock, lock timeout,
// out of disk or memory, too many connections. A lost connection is made
// again by the next call (a read, or the BEGIN of a transaction, that finds
// the connection gone reconnects and runs once more at once; a write that
// was cut off throws a transient error, since it may or may not have
// committed). Values travel as text; a Conn is used from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/pg_queue.h"
#include "jobs/queue.h"

struct pg_conn;
struct pg_result;

namespace ns::jobs::pg {

// Query parameters ($1, $2, ...), each text or NULL.
class Params {
 public:
  Params& add(int64_t v);
  Params& add(int32_t v) { return add(int64_t{v}); }
  Params& add(double v);
  Params& add(bool v);
  // Text, made storable: PostgreSQL text holds only valid UTF-8 without NUL
  // bytes, so those are replaced by U+FFFD (generated text may contain raw
  // bytes of a multi-byte character cut in two; user input is validated
  // before it gets here).
  Params& add(std::string_view v);
  Params& add(const char* v) { return add(std::string_view(v)); }
  Params& add(const std::string& v) { return add(std::string_view(v)); }
  Params& add_null();
  // Empty text binds NULL (optional text columns).
  Params& add_text_or_null(std::string_view v);
  // 0 binds NULL (optional times and counts).
  Params& add_or_null(int64_t v);
  // A PostgreSQL array literal of integers: {1,2,3}.
  template <class Int>
  Params& add_array(std::span<const Int> values) {
    std::string s = "{";
    for (size_t i = 0; i < values.size(); ++i) {
      if (i != 0) s += ',';
      s += std::to_string(values[i]);
    }
    s += '}';
    return add_raw(std::move(s));
  }

  int size() const { return static_cast<int>(values_.size()); }
  // For PQexecParams; valid until this object changes (built on each call,
  // since copies and moves of the strings move their characters).
  const char* const* pointers() const;

 private:
  Params& add_raw(std::string v);
  std::vector<std::optional<std::string>> values_;
  mutable std::vector<const char*> pointers_;
};

// A query's rows, read as text. Column indexes are 0-based.
class Result {
 public:
  explicit Result(pg_result* r) : r_(r) {}
  ~Result();
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  int rows() const;
  int columns() const;
  std::string column_name(int col) const;
  // The command tag: "COMMIT", "ROLLBACK", "UPDATE 3", ...
  std::string command() const;
  // Rows changed by an INSERT/UPDATE/DELETE.
  int64_t affected() const;
  bool is_null(int row, int col) const;
  std::string text(int row, int col) const;  // "" for NULL
  int64_t int64(int row, int col) const;     // 0 for NULL
  double real(int row, int col) const;       // 0 for NULL
  bool boolean(int row, int col) const;      // false for NULL
  // An integer array column ({1,2,3}); empty for NULL.
  std::vector<int64_t> int_array(int row, int col) const;

 private:
  pg_result* r_;
};

class Conn {
 public:
  // Connects (throws DatabaseError: transient when the server cannot be
  // reached, not when the URL, the user or the database is wrong).
  explicit Conn(std::string url, PgOptions options = {});
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // One statement with parameters.
  Result exec(std::string_view sql, const Params& params = {});
  // Several statements without parameters (migrations).
  void exec_script(std::string_view sql);

  // The URL with any password hidden: how messages name the database.
  const std::string& name() const { return name_; }
  bool in_transaction() const { return in_transaction_; }

 private:
  friend class Transaction;
  void connect();
  void ensure_connected(std::string_view sql);
  bool connection_ok() const;
  bool drop_if_dead();  // after an error without SQLSTATE on a connection libpq still calls OK
  [[noreturn]] void raise(pg_result* r, std::string_view sql);
  Result run(std::string_view sql, const Params& params, bool retry_if_reconnected);

  std::string url_;
  PgOptions options_;
  std::string name_;
  pg_conn* conn_ = nullptr;
  bool in_transaction_ = false;
};

// BEGIN on construction (READ COMMITTED: every statement sees the latest
// commits; rows are locked explicitly with FOR UPDATE where a decision
// depends on them). Rolls back unless commit() ran; commit() throws unless
// the server really committed (a lost connection, or a transaction an earlier
// error aborted, which PostgreSQL "commits" by answering ROLLBACK).
class Transaction {
 public:
  explicit Transaction(Conn& conn);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Conn& conn_;
  bool open_ = true;
};

// Whether a SQLSTATE is worth retrying later (see the header comment).
bool transient_sqlstate(std::string_view sqlstate);

}  // namespace ns::jobs::pg
