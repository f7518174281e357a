// The SQLite backend's queue class, shared by its source files:
// sqlite_queue.cpp (opening, reads, the fleet), sqlite_transitions.cpp (the
// state machine's primitives, jobs/queue_transitions.h), sqlite_copy.cpp
// (migrate-queue) and sqlite_binds.cpp (how a job's fields map onto
// statement parameters and back). Internal: everything else sees Queue.
#pragma once

#include <cstdint>
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

  // ---- reads ------------------------------------------------------------------
  std::optional<Checkpoint> checkpoint(int64_t id) override;
  bool cancel_requested(int64_t id) override;
  std::optional<Job> get(int64_t id) override;
  std::vector<Job> list(const ListFilter& filter) override;
  std::vector<AttemptRecord> attempts(int64_t id) override;
  std::vector<BatchSummary> batches(int32_t limit) override;
  int64_t prune(int64_t older_than_ms, const std::vector<JobState>& states) override;

  // ---- the fleet ----------------------------------------------------------------
  void register_worker(const WorkerInfo& info) override;
  void worker_heartbeat(const std::string& id, const std::string& model, std::span<const int64_t> jobs,
                        const std::string& problem) override;
  void worker_stopped(const std::string& id) override;
  std::vector<WorkerInfo> workers() override;

  // ---- copying a queue (nightshift migrate-queue; added with the PostgreSQL backend) ----
  std::vector<JobCopy> export_jobs(int64_t after_id, int32_t limit) override;
  std::optional<MigrationMark> migration_mark(const std::string& source) override;
  void finish_migration(const std::string& source, bool keep_ids) override;

 protected:
  // ---- the state machine's primitives (jobs/queue_transitions.h) ------------------
  std::unique_ptr<WriteTx> begin_write() override { return std::make_unique<HeldTx<WriteTransaction>>(db_); }
  SubmitOutcome insert(const JobSpec& spec) override;
  bool anything_claimable(const std::string& servable_json) override;
  std::vector<QueueHead> claimable_head(int limit, const std::string& servable_json) override;
  std::vector<Job> claim_ids(const std::vector<int64_t>& ids, const std::string& worker, int64_t lease_ms) override;
  std::optional<Orphan> running_under(const Lease& lease) override;
  bool extend_lease(const Lease& lease, int64_t lease_ms, const JobProgress* progress) override;
  void put_checkpoint(const Lease& lease, const Checkpoint& cp) override;
  bool finish_fenced(const Lease& lease, const char* state, const std::string* error_kind,
                     const std::string* error) override;
  void requeue_fenced(const Lease& lease, int64_t delay_ms, const std::string& error_kind,
                      const std::string& error) override;
  void release_fenced(const Lease& lease, bool run_alone) override;
  void end_attempt(const Lease& lease, const AttemptEnd& end) override;
  void write_result(int64_t id, const JobResult& r) override;
  void drop_checkpoint(int64_t id) override;
  bool any_orphan(const OrphanScope& scope) override;
  std::vector<Orphan> orphans(const OrphanScope& scope) override;
  std::optional<std::string> locked_state_of(int64_t id) override;
  void finish_unfenced(int64_t id, const char* state) override;
  void request_cancel(int64_t id) override;
  void reset_to_queued(int64_t id, const std::string& model) override;
  QueueCounts counts_of(const std::string& batch) override;
  void refuse_taken_ids(std::span<const JobCopy> copies) override;
  SubmitOutcome import_one(const JobCopy& c, bool keep_ids) override;
  void mark_page(const std::string& source, bool keep_ids, int64_t last_source_id, int64_t copied,
                 int64_t skipped) override;

 private:
  // Claimable jobs in claim order: ?1 now, ?2 limit, ?3 NULL or a JSON array of servable models.
  static constexpr const char* kHead = R"(
      SELECT id, model, run_alone FROM jobs WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= ?1)
        AND (?3 IS NULL OR model IN (SELECT value FROM json_each(?3)))
      ORDER BY priority DESC, id LIMIT ?2)";
  std::optional<int64_t> id_for_key(const std::string& key);
  // Inside the inserting transaction: the job's grammar column (006_grammar), when it has one.
  void set_grammar(int64_t id, const std::string& grammar);
  // The columns of schema/sqlite/NNN_choices_logprobs.sql (n, logprobs), written after the row they belong to.
  void write_output_options(int64_t id, const SamplingParams& sp);
  void write_result_choices(int64_t id, const JobResult& r);
  void write_checkpoint_choices(int64_t id, const Checkpoint& cp);
  Db db_;
  int64_t claim_now_ = 0;  // the clock reading of the claim in progress
};

}  // namespace ns::jobs::sqlite
