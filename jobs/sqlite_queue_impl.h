// The SQLite backend's queue class, shared by its source files:
// sqlite_queue.cpp (opening, reads, the fleet), sqlite_transitions.cpp (the
// state machine's primitives, jobs/queue_transitions.h), sqlite_copy.cpp
// (migrate-queue) and sqlite_binds.cpp (how a job's fields map onto
// statement parameters and back). Internal: everything else sees Queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jobs/queue_transitions.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_queue.h"

namespace ns::jobs::sqlite {

using JobCopy = Queue::JobCopy;

// The fence of every worker write: ?1 job id, ?2 worker, ?3 attempt.
inline constexpr const char* kFence = " WHERE id = ?1 AND state = 'running' AND worker = ?2 AND attempt = ?3";

// The current row of a statement.
class StmtRow final : public Row {
 public:
  explicit StmtRow(const Stmt& st) : st_(st) {}
  bool is_null(int col) const override { return st_.is_null(col); }
  int64_t int64(int col) const override { return st_.int64(col); }
  double real(int col) const override { return st_.real(col); }
  std::string text(int col) const override { return st_.text(col); }
  bool boolean(int col) const override { return st_.int64(col) != 0; }

 private:
  const Stmt& st_;
};

// Token ids, job ids: a JSON array of integers.
template <class Int>
std::string ints_to_json(std::span<const Int> values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(values[i]);
  }
  return s + "]";
}
std::vector<int32_t> tokens_from_json(const std::string& text, int64_t id, const std::string& path);
std::vector<int64_t> ids_from_json(const std::string& text, const std::string& worker, const std::string& path);

Stmt& bind_fence(Stmt& st, const Lease& lease);
// Both columns of an optional time (epoch ms and ISO text): NULL for 0.
Stmt& bind_time(Stmt& st, int index, int64_t ms);
// Error kind and text, or two NULLs.
Stmt& bind_errors(Stmt& st, int index, const std::string* error_kind, const std::string* error);
// The 14 columns from model to idempotency_key, from `first`.
Stmt& bind_spec_head(Stmt& st, int first, const JobSpec& spec);
// The 5 columns messages, batch, custom_id, source_path, source_line, from `first`.
Stmt& bind_spec_input(Stmt& st, int first, const JobSpec& spec);

class SqliteQueue final : public TransitionQueue {
 public:
  SqliteQueue(const std::string& path, const SqliteOptions& options);

  // Queue's members, the state machine's primitives and the helpers both backends have:
#include "jobs/queue_backend_members.inc"

 protected:
  std::unique_ptr<WriteTx> begin_write() override { return std::make_unique<HeldTx<WriteTransaction>>(db_); }

 private:
  // Claimable jobs in claim order: ?1 now, ?2 limit, ?3 NULL or a JSON array of servable models.
  // ?4: the latest end of a retry backoff this clock believes (later: stamped by a clock running ahead).
  static constexpr const char* kHead = R"(
      SELECT id, model, run_alone FROM jobs WHERE state = 'queued'
        AND (not_before_ms IS NULL OR not_before_ms <= ?1 OR (error_kind IS NOT NULL AND not_before_ms > ?4))
        AND (?3 IS NULL OR model IN (SELECT value FROM json_each(?3)))
      ORDER BY priority DESC, id LIMIT ?2)";
  // ?4 of kHead at `now`.
  int64_t backoff_horizon(int64_t now) const { return now + max_backoff_ms_ + kClockBackMs; }
  // Of the running jobs whose lease looks untrusted (untrusted_lease_sql at
  // `now`), those recovery may take: a stopped worker's at once, others once
  // watched unrenewed for SqliteOptions::lease_watch_ms. Watches every running lease.
  std::vector<int64_t> takeable_leases(int64_t now);
  struct Watched {
    int64_t attempt = 0, lease_expires_ms = 0;
    std::chrono::steady_clock::time_point since;  // when this lease value was first seen
    bool seen_untrusted = false;                  // this clock distrusted it (untrusted_lease_sql)
    bool told = false;                            // on_clock_disagreement was called for this attempt
  };
  Db db_;
  int64_t claim_now_ = 0;               // the clock reading of the claim in progress
  std::map<int64_t, Watched> watched_;  // job id -> its lease as last seen
  int64_t lease_watch_ms_ = 0;
  int64_t max_backoff_ms_ = 0;
  std::function<void(const std::string&)> on_clock_disagreement_;
};

}  // namespace ns::jobs::sqlite
