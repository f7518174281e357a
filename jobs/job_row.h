// Reading queue rows, shared by the backends: the job SELECT (the same
// columns on SQLite and PostgreSQL), the decoding of a job, an attempt and
// the stop list, whatever database library the row comes from (each backend
// wraps its own row in a Row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::jobs {

// One row of a query result, columns 0-based; NULL reads as 0, "" or false.
class Row {
 public:
  virtual ~Row() = default;
  virtual bool is_null(int col) const = 0;
  virtual int64_t int64(int col) const = 0;
  virtual double real(int col) const = 0;
  virtual std::string text(int col) const = 0;
  virtual bool boolean(int col) const = 0;
};

// One column into a field, by the field's type.
inline void read_column(const Row& row, int col, int64_t& v) { v = row.int64(col); }
inline void read_column(const Row& row, int col, int32_t& v) { v = static_cast<int32_t>(row.int64(col)); }
inline void read_column(const Row& row, int col, std::string& v) { v = row.text(col); }
inline void read_column(const Row& row, int col, bool& v) { v = row.boolean(col); }

// A T whose `fields` are read from consecutive columns from `first`, in the
// order listed (the SELECT's column order, stated once beside it).
template <class T, class... F>
T read_columns(const Row& row, int first, F T::*... fields) {
  T out;
  int col = first;
  (read_column(row, col++, out.*fields), ...);  // a comma fold runs left to right
  return out;
}

// Column order shared by every job SELECT and read_job(); add the WHERE.
extern const char* const kSelectJob;

// What list() adds after its WHERE for an order (both dialects): the ORDER
// BY, and for recently_finished the condition that a job has finished.
const char* list_order_sql(ListFilter::Order order);

// `db` names the database in error messages.
Job read_job(const Row& row, const std::string& db);
// Columns attempt, worker, started_ms, ended_ms, resumed_tokens, outcome,
// error_kind, error from `first`.
AttemptRecord read_attempt(const Row& row, int first);
// "done,failed" for prune(): the final states among `states`, "" when none.
std::string final_states_csv(const std::vector<JobState>& states);
// The fleet, as `nightshift status` lists it (running first, then by last heartbeat).
extern const char* const kSelectWorkers;
// Columns id, host, pid, model, version, started_ms, heartbeat_ms,
// stopped_ms, problem of kSelectWorkers (the backend reads the 9th, jobs, stored its own way).
WorkerInfo read_worker(const Row& row);
// migrate-queue's record of one source (queue_migrations); add "WHERE source = <param>".
extern const char* const kSelectMigrationMark;
Queue::MigrationMark read_migration_mark(const Row& row);

// The stop list as stored (a JSON array); throws invalid_input for a stop
// string that is not valid UTF-8.
std::string stop_to_json(const std::vector<std::string>& stop);

// A sampling value (float) as the REAL / double precision a database stores:
// the shortest decimal that reads back as the same float (0.7f is stored as
// 0.7, not 0.699999988079071, which a person reading the row would see), so
// the column shows what was asked and reads back bit for bit.
double stored_real(float v);
std::vector<std::string> stop_from_json(const std::string& text, int64_t id, const std::string& db);
JobState state_from_column(const std::string& s, int64_t id, const std::string& db);

// Choices 1..n-1 of a result as stored (results.choices): "" (NULL) when none.
std::string choices_to_json(const std::vector<JobChoice>& choices);
std::vector<JobChoice> choices_from_json(const std::string& text, int64_t id, const std::string& db);
// Choices 1..n-1's checkpointed tokens (checkpoints.choices): "" (NULL) when none.
std::string token_lists_to_json(const std::vector<std::vector<int32_t>>& lists);
std::vector<std::vector<int32_t>> token_lists_from_json(const std::string& text, int64_t id, const std::string& db);

}  // namespace ns::jobs
