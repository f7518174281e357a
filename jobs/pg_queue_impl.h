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
  explicit PgQueue(const std::string& url);

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

  // ---- copying a queue --------------------------------------------------------
  std::vector<JobCopy> export_jobs(int64_t after_id, int32_t limit) override;
  std::optional<MigrationMark> migration_mark(const std::string& source) override;
  void finish_migration(const std::string& source, bool keep_ids) override;

 protected:
  // ---- the state machine's primitives (jobs/queue_transitions.h) ------------------
  std::unique_ptr<WriteTx> begin_write() override { return std::make_unique<HeldTx<Transaction>>(db_); }
  SubmitOutcome insert(const JobSpec& spec) override;
  bool anything_claimable(const std::string&) override;
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
  void after_kept_ids() override;

 private:
  std::vector<Job> select_jobs(const std::string& where, const Params& p);
  std::optional<int64_t> id_for_key(const std::string& key);
  // Inside the inserting transaction: the job's grammar column (004_grammar), when it has one.
  void set_grammar(int64_t id, const std::string& grammar);
  // The columns of schema/postgres/NNN_choices_logprobs.sql (n, logprobs), written after the row they belong to.
  void write_output_options(int64_t id, const SamplingParams& sp);
  void write_result_choices(int64_t id, const JobResult& r);
  void write_checkpoint_choices(int64_t id, const Checkpoint& cp);
  Conn db_;
};

}  // namespace ns::jobs::pg
