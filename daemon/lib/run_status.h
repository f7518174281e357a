// What the worker is doing right now, shared between the worker thread (which
// runs the job) and the heartbeat thread (which renews the job's lease and
// reports STATUS= to systemd). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "jobs/queue.h"

namespace ns::daemon {

class RunStatus {
 public:
  struct Snapshot {
    std::optional<jobs::Lease> lease;  // the running job's, if any
    std::string model;
    int32_t generated = 0;   // completion tokens so far (resumed ones included)
    int32_t max_tokens = 0;
    int32_t resumed = 0;     // tokens taken from the checkpoint
    double tok_s = 0;        // decode speed of this attempt
    int64_t jobs_finished = 0;
  };

  void start_job(const jobs::Lease& lease, const std::string& model, int32_t max_tokens, int32_t resumed);
  void progress(int32_t generated, double tok_s);
  void end_job();
  Snapshot snapshot() const;

  // The heartbeat found the lease taken over: the worker must drop the job.
  // Ignored (false) unless `lease` is the running job's: a late heartbeat
  // for a job that just ended is not news.
  bool mark_lease_lost(const jobs::Lease& lease);
  // Checked by the worker on every token, hence lock-free.
  bool lease_lost() const { return lease_lost_.load(); }

  // The worker shows it is alive: on every token, loop turn and model load.
  // The heartbeat stops renewing leases and pinging the watchdog when this
  // goes quiet for longer than the stall timeout (a hung generation must not
  // keep its job forever).
  void touch();
  // Milliseconds since the last touch() (or since construction).
  int64_t quiet_ms() const;

 private:
  static int64_t now_ms();
  mutable std::mutex mu_;
  Snapshot s_;
  std::atomic<bool> lease_lost_{false};
  std::atomic<int64_t> last_touch_ms_{now_ms()};
};

// "job 42 (tiny): 120/400 tokens, 35.2 tok/s; 17 queued" or "idle; 17 queued".
std::string status_line(const RunStatus::Snapshot& s, const jobs::QueueCounts* counts);

}  // namespace ns::daemon
