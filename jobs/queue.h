// The job queue: what the CLI submits to and the daemon claims from.
// One interface, backends behind it (SQLite now: jobs/sqlite_queue.cpp; a
// server database later), so the daemon and the CLI never see SQL.
//
// Contract: every method is one transaction; methods throw ns::Error(database)
// with the SQLite message and the database path on failure. A Queue object is
// used from one thread; several processes may use the same database at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace ns::jobs {

enum class JobState { queued, running, done, failed, cancelled };
inline constexpr JobState kAllJobStates[] = {JobState::queued, JobState::running, JobState::done,
                                             JobState::failed, JobState::cancelled};
const char* state_name(JobState s);
std::optional<JobState> parse_state(const std::string& s);

struct JobSpec {
  std::string model;            // a model name from the daemon config's `models:` map
  std::string prompt;
  SamplingParams sampling;
  int32_t priority = 0;         // higher runs first; ties run oldest first
  std::string idempotency_key;  // empty = none; a second submit with the same key returns the first job
};

struct JobResult {
  std::string text;
  std::string finish_reason;   // "stop", "length", "cancelled"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double queue_wait_ms = 0, load_ms = 0, prefill_ms = 0, decode_ms = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  uint64_t peak_rss_bytes = 0;
  uint64_t bytes_read = 0;
};

struct Job {
  int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::queued;
  int64_t created_ms = 0, started_ms = 0, finished_ms = 0;  // epoch ms; 0 = not yet
  // started_ms is the latest claim (a released job is claimed again later).
  std::string worker;           // who claimed it
  int32_t attempts = 0;
  bool cancel_requested = false;
  std::string error_kind, error;  // for failed jobs
  std::optional<JobResult> result;
};

struct SubmitOutcome {
  int64_t id = 0;
  bool created = true;  // false: the idempotency key matched an existing job
};

struct ListFilter {
  std::optional<JobState> state;
  int32_t limit = 50;  // newest first; <= 0 means no limit
};

struct QueueCounts {
  int64_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0;
};

class Queue {
 public:
  virtual ~Queue() = default;
  // Validates the spec (sampling ranges, non-empty prompt and model) and throws
  // ns::Error(invalid_input) before touching the database if it is bad.
  virtual SubmitOutcome submit(const JobSpec& spec) = 0;
  // Claims the best queued job (priority desc, then id asc) for `worker`:
  // state -> running, attempts + 1, started_ms set. nullopt when none is queued.
  virtual std::optional<Job> claim(const std::string& worker) = 0;
  virtual void complete(int64_t id, const JobResult& result) = 0;
  virtual void fail(int64_t id, const std::string& error_kind, const std::string& message) = 0;
  // Back to queued (graceful shutdown mid-job); the attempt does not count
  // (attempts - 1), worker and started_ms are cleared. A job whose cancel was
  // requested meanwhile becomes cancelled instead.
  //
  // complete / fail / release / finish_cancelled act on a running job only and
  // throw ns::Error(invalid_input) naming the job's actual state otherwise
  // (e.g. someone edited the row by hand), so a worker never overwrites a final state.
  virtual void release(int64_t id) = 0;
  // Queued jobs become cancelled at once; running jobs get cancel_requested
  // and the worker finishes them as cancelled. False if the id is unknown or already final.
  virtual bool cancel(int64_t id) = 0;
  virtual bool cancel_requested(int64_t id) = 0;
  // Marks a running job cancelled (the worker saw cancel_requested), keeping any partial result.
  virtual void finish_cancelled(int64_t id, const JobResult& partial) = 0;
  // Crash recovery: jobs still `running` under `worker` can only be left over
  // from an earlier process with that worker id that died mid-job. They go
  // back to queued (cancelled if a cancel was requested); the interrupted
  // attempt stays counted. Returns how many. Only meaningful with a stable,
  // unique worker id.
  virtual int64_t requeue_abandoned(const std::string& worker) = 0;
  virtual std::optional<Job> get(int64_t id) = 0;
  virtual std::vector<Job> list(const ListFilter& filter) = 0;
  virtual QueueCounts counts() = 0;
};

// Opens (creating if needed) a SQLite queue, applying schema/sqlite migrations.
std::unique_ptr<Queue> open_sqlite_queue(const std::string& path);

}  // namespace ns::jobs
