// The daemon's periodic thread (its "cron"): renews the running jobs' leases
// every min(lease_ms / 3, progress_interval_ms), writing each job's progress
// with it; reports STATUS= and WATCHDOG=1 to systemd and refreshes this
// daemon's row in the workers table every status_interval_ms (and at once when
// the running jobs or the worker's configuration problem change); and calls the
// daemon's own hook (config reload, drain deadline) every tick.
//
// Contract: runs from construction until stop() or destruction (both stop
// and join it; stop() is idempotent). The daemon stops it before it marks
// itself stopped in the workers table, so no late heartbeat clears that mark. It uses its own Queue, opened on its thread (a Queue is used from
// one thread). A renewal refused by the fence because the job was recovered
// (ended_by_recovery) marks the lease lost in RunStatus, which makes the
// worker drop the job at its next token. When the
// worker has been quiet for longer than stall_timeout_ms (a hung generation),
// the heartbeat stops renewing the lease and pinging the watchdog, so another
// daemon can take the job over and systemd can restart this one. Database
// errors are logged and retried at the next renewal; they never stop the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "jobs/queue.h"

namespace ns::daemon {

struct HeartbeatOptions {
  int64_t lease_ms = 60'000;
  int64_t stall_timeout_ms = 600'000;
  int status_interval_ms = 2000;
  int progress_interval_ms = 5000;
  int tick_ms = 50;
  std::string worker_id;  // "" = do not touch the workers table
};

// Whether a lease the fence refused was taken by recovery (or by a later
// claim), as the attempts history says, rather than ended by its own holder.
bool ended_by_recovery(const std::vector<jobs::AttemptRecord>& history, const jobs::Lease& lease);

class Heartbeat {
 public:
  using QueueFactory = std::function<std::unique_ptr<jobs::Queue>()>;

  Heartbeat(QueueFactory open_queue, RunStatus& status, const ServiceNotifier& notifier, HeartbeatOptions options,
            std::function<void()> on_tick = {});
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Stops and joins the thread; nothing is written after it returns.
  void stop();
  // SIGHUP: new timings apply from the next tick.
  void set_timing(int64_t lease_ms, int64_t stall_timeout_ms);
  // Lease renewals that held (for tests and the log).
  int64_t renewals() const { return renewals_.load(); }
  // Renewals the fence refused: a take-over, or the worker's own final
  // write landing first (only the former marks the lease lost).
  int64_t refusals() const { return refusals_.load(); }

 private:
  void loop();
  void tick(jobs::Queue* queue);
  void renew(jobs::Queue& queue, const RunStatus::JobView& job);

  QueueFactory open_queue_;
  RunStatus& status_;
  const ServiceNotifier& notifier_;
  std::function<void()> on_tick_;
  std::atomic<int64_t> lease_ms_, stall_timeout_ms_;
  const int status_interval_ms_, progress_interval_ms_, tick_ms_;
  const std::string worker_id_;

  std::atomic<int64_t> renewals_{0}, refusals_{0};
  // Owned by the thread.
  struct Renewal {
    jobs::Lease lease;
    int64_t last_ms = 0;
  };
  std::map<int64_t, Renewal> renewed_;  // by job id
  int64_t last_watchdog_ms_ = 0, last_status_ms_ = 0;
  std::vector<int64_t> status_jobs_;  // the jobs the last STATUS= was about
  std::string status_problem_;        // and the configuration problem it reported
  bool stall_reported_ = false;

  std::mutex mu_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace ns::daemon
