// The outcome writer: a job's end written to the queue under its lease's
// fence, and a finished generation turned into that end. Part of the worker
// (daemon/lib/worker.h).
//
// Contract:
// - write() stores the Execution as its outcome says (the result, a failure,
//   a retry after retry_backoff, a release with the final checkpoint) and
//   returns the outcome as it landed: dead or cancelled when the queue turned
//   a retry into those, lease_lost when the fence refused the write (a stale
//   worker's write; nothing is written, the error is logged).
// - persist() runs one queue write, retrying a transient database error
//   (locked beyond the busy timeout, disk full) with database_backoff until it
//   goes through or the fence refuses it, so a finished job's result is not
//   thrown away; other database errors propagate as DatabaseError.
// - finished() is what a generation's result means for its job: its text,
//   choices, logprobs and stats (jobs/result_stats.h, the one table of them)
//   and its outcome: done when every choice reached its end, failed when any
//   choice found no token its grammar allows, or for a generation with a
//   choice stopped early why the progress policy stopped it (lease lost,
//   released with its checkpoint, cancelled).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "daemon/lib/job_run.h"
#include "daemon/lib/run_status.h"
#include "engine/engine.h"
#include "jobs/backoff.h"
#include "jobs/queue.h"

namespace ns::daemon {

class OutcomeWriter {
 public:
  // `options` is the worker's, read at each call.
  OutcomeWriter(jobs::Queue& queue, const WorkerOptions& options, RunStatus& status)
      : queue_(queue), options_(options), status_(status) {}

  JobOutcome write(const jobs::Job& job, const Execution& ex);

  template <class F>
  auto persist(const char* what, int64_t job_id, F&& write) -> decltype(write()) {
    for (int32_t failures = 1;; ++failures) {
      try {
        return write();
      } catch (const jobs::DatabaseError& e) {
        if (!e.transient()) throw;
        const int64_t delay = jobs::backoff_delay_ms(options_.database_backoff, failures);
        spdlog::warn("job {}: cannot {} yet: {}; retrying in {} ms", job_id, what, e.what(), delay);
        // Not cut short by `stop`: the result of a finished job is worth the
        // wait, and the drain deadline bounds it.
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
        status_.touch();
      }
    }
  }

 private:
  jobs::Queue& queue_;
  const WorkerOptions& options_;
  RunStatus& status_;
};

Execution finished(const RunningJob& run, const GenerationResult& gen);

}  // namespace ns::daemon
