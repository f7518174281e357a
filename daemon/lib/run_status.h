// What the worker is doing right now, shared between the worker thread (which
// runs the jobs of its batch) and the heartbeat thread (which renews their
// leases, writes their progress and reports STATUS= to systemd). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::daemon {

class RunStatus {
 public:
  struct JobView {
    jobs::Lease lease;
    int32_t prompt_tokens = 0;
    int32_t prefilled = 0;  // prompt tokens processed so far
    int32_t generated = 0;  // completion tokens so far (resumed ones included)
    int32_t max_tokens = 0;
    int32_t resumed = 0;  // tokens taken from the checkpoint
    double tok_s = 0;     // this job's decode speed now (its batch's step rate, daemon/lib/step_rate.h)
    double eta_s = -1;    // seconds left until max_tokens, estimated at `sampled`; < 0 = unknown
    std::chrono::steady_clock::time_point sampled{};  // when estimate() last wrote it
  };
  struct Snapshot {
    std::vector<JobView> jobs;  // running now, oldest start first
    std::string model;          // the model they run on
    std::string loaded_model;   // the model whose engine is loaded ("" = none), running or not
    int64_t jobs_finished = 0;
    std::string problem;  // what the daemon's own configuration keeps it from serving ("" = nothing)
  };

  void start_job(const jobs::Lease& lease, const std::string& model, int32_t max_tokens, int32_t resumed);
  void progress(int64_t job_id, int32_t prompt_tokens, int32_t prefilled, int32_t generated, double tok_s);
  // The worker's estimate after a step: the job's rate and the seconds it has
  // left (< 0 = unknown), as of now; the heartbeat counts it down to when it writes.
  void estimate(int64_t job_id, double tok_s, double eta_s);
  void end_job(int64_t job_id);
  void set_loaded_model(const std::string& model);
  // The worker's configuration problem (Worker: models it cannot serve), for
  // the workers row, STATUS= and `nightshift status`.
  void set_problem(const std::string& problem);
  Snapshot snapshot() const;

  // The heartbeat found the lease taken over: the worker must drop the job.
  // Ignored (false) unless `lease` is a running job's: a late heartbeat for a
  // job that just ended is not news.
  bool mark_lease_lost(const jobs::Lease& lease);
  // Checked by the worker on every token: a lock-free check first.
  bool lease_lost(int64_t job_id) const;

  // The worker shows it is alive: on every token, loop turn and model load.
  // The heartbeat stops renewing leases and pinging the watchdog when this
  // goes quiet for longer than the stall timeout (a hung generation must not
  // keep its jobs forever).
  void touch();
  // Milliseconds since the last touch() (or since construction).
  int64_t quiet_ms() const;

 private:
  static int64_t now_ms();
  // Applies `change` to the running job `job_id`'s view, under the lock.
  template <class F>
  void update(int64_t job_id, F&& change);
  mutable std::mutex mu_;
  Snapshot s_;
  std::vector<int64_t> lost_;  // jobs whose lease was taken over
  std::atomic<int> lost_count_{0};
  std::atomic<int64_t> last_touch_ms_{now_ms()};
};

// One job:  "job 42 (tiny): 120/400 tokens, 35.2 tok/s; 17 queued; 3 finished since start"
// Several:  "3 jobs (tiny): 42 120/400, 43 7/64, 44 prefill 96/512; 61.0 tok/s; ..."
// None:     "idle; 17 queued; ..."
std::string status_line(const RunStatus::Snapshot& s, const jobs::QueueCounts* counts);

}  // namespace ns::daemon
