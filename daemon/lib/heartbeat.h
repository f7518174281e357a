// The daemon's periodic thread (its "cron"): renews the running job's lease
// every lease_ms / 3, reports STATUS= and WATCHDOG=1 to systemd, and calls the
// daemon's own hook (config reload, drain deadline) every tick.
//
// Contract: runs from construction to destruction (the destructor stops and
// joins it). It uses its own Queue, opened on its thread (a Queue is used from
// one thread). A renewal refused by the fence marks the lease lost in
// RunStatus, which makes the worker drop the job at its next token. When the
// worker has been quiet for longer than stall_timeout_ms (a hung generation),
// the heartbeat stops renewing the lease and pinging the watchdog, so another
// daemon can take the job over and systemd can restart this one. Database
// errors are logged and retried at the next renewal; they never stop the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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
  int tick_ms = 50;
};

class Heartbeat {
 public:
  using QueueFactory = std::function<std::unique_ptr<jobs::Queue>()>;

  Heartbeat(QueueFactory open_queue, RunStatus& status, const ServiceNotifier& notifier, HeartbeatOptions options,
            std::function<void()> on_tick = {});
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // SIGHUP: new timings apply from the next tick.
  void set_timing(int64_t lease_ms, int64_t stall_timeout_ms);
  // Lease renewals that held (for tests and the log).
  int64_t renewals() const { return renewals_.load(); }

 private:
  void loop();
  void tick(jobs::Queue* queue);
  void renew(jobs::Queue& queue, const jobs::Lease& lease);

  QueueFactory open_queue_;
  RunStatus& status_;
  const ServiceNotifier& notifier_;
  std::function<void()> on_tick_;
  std::atomic<int64_t> lease_ms_, stall_timeout_ms_;
  const int status_interval_ms_, tick_ms_;

  std::atomic<int64_t> renewals_{0};
  // Owned by the thread.
  jobs::Lease renewed_lease_;
  int64_t last_renewal_ms_ = 0, last_watchdog_ms_ = 0, last_status_ms_ = 0;
  int64_t status_job_id_ = 0;  // the job the last STATUS= was about (0: idle)
  bool stall_reported_ = false;

  std::mutex mu_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace ns::daemon
