// The PostgreSQL backend's queue class, shared by its source files:
// pg_queue.cpp (opening, reads, the fleet), pg_transitions.cpp (the state
// machine's primitives, jobs/queue_transitions.h), pg_copy.cpp
// (migrate-queue) and pg_binds.cpp (how a job's fields map onto query
// parameters and back). Internal: everything else sees Queue.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jobs/pg_conn.h"
#include "jobs/pg_queue.h"
#include "jobs/queue_transitions.h"

namespace ns::jobs::pg {

using JobCopy = Queue::JobCopy;

// The fence of every worker write: $1 job id, $2 worker, $3 attempt.
inline constexpr const char* kFence = " WHERE id = $1 AND state = 'running' AND worker = $2 AND attempt = $3";

// One row of a result.
class ResultRow final : public Row {
 public:
  ResultRow(const Result& r, int row) : r_(r), row_(row) {}
  bool is_null(int col) const override { return r_.is_null(row_, col); }
  int64_t int64(int col) const override { return r_.int64(row_, col); }
  double real(int col) const override { return r_.real(row_, col); }
  std::string text(int col) const override { return r_.text(row_, col); }
  bool boolean(int col) const override { return r_.boolean(row_, col); }

 private:
  const Result& r_;
  int row_;
};

// $1 job id, $2 worker, $3 attempt.
Params fence(const Lease& lease);
// Error kind and text, or two NULLs.
Params& add_errors(Params& p, const std::string* error_kind, const std::string* error);
// The 14 columns from model to idempotency_key.
Params& add_spec_head(Params& p, const JobSpec& spec);
// The 5 columns messages, batch, custom_id, source_path, source_line.
Params& add_spec_input(Params& p, const JobSpec& spec);
// Columns job_id, then those of read_attempt().
AttemptRecord read_attempt_row(const Result& r, int i);
// Columns attempt, tokens, saved_ms from `first`.
Checkpoint read_checkpoint(const Result& r, int row, int first, int64_t id, const std::string& db);

class PgQueue final : public TransitionQueue {
 public:
  PgQueue(const std::string& url, const PgOptions& options);

  // Queue's members, the state machine's primitives and the helpers both backends have:
#include "jobs/queue_backend_members.inc"

 protected:
  std::unique_ptr<WriteTx> begin_write() override { return std::make_unique<HeldTx<Transaction>>(db_); }
  void after_kept_ids() override;

 private:
  std::vector<Job> select_jobs(const std::string& where, const Params& p);
  Conn db_;
};

}  // namespace ns::jobs::pg
