#include "daemon/lib/heartbeat.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace ns::daemon {
namespace {

int64_t steady_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

bool same_lease(const jobs::Lease& a, const jobs::Lease& b) {
  return a.job_id == b.job_id && a.attempt == b.attempt && a.worker == b.worker;
}

}  // namespace

Heartbeat::Heartbeat(QueueFactory open_queue, RunStatus& status, const ServiceNotifier& notifier,
                     HeartbeatOptions options, std::function<void()> on_tick)
    : open_queue_(std::move(open_queue)),
      status_(status),
      notifier_(notifier),
      on_tick_(std::move(on_tick)),
      lease_ms_(options.lease_ms),
      stall_timeout_ms_(options.stall_timeout_ms),
      status_interval_ms_(options.status_interval_ms),
      progress_interval_ms_(options.progress_interval_ms),
      tick_ms_(options.tick_ms),
      worker_id_(options.worker_id),
      thread_([this] { loop(); }) {}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::stop() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::set_timing(int64_t lease_ms, int64_t stall_timeout_ms) {
  lease_ms_ = lease_ms;
  stall_timeout_ms_ = stall_timeout_ms;
}

void Heartbeat::loop() {
  std::unique_ptr<jobs::Queue> queue;
  int64_t last_open_attempt = -1'000'000;
  std::unique_lock lock(mu_);
  while (!quit_) {
    lock.unlock();
    if (!queue && steady_ms() - last_open_attempt >= 1000) {
      last_open_attempt = steady_ms();
      try {
        queue = open_queue_();
      } catch (const Error& e) {
        spdlog::error("heartbeat: cannot open the queue (leases are not renewed until it opens): {}", e.what());
      }
    }
    try {
      tick(queue.get());
    } catch (const std::exception& e) {  // never let the thread die: leases depend on it
      spdlog::error("heartbeat: {}", e.what());
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(tick_ms_), [this] { return quit_; });
  }
}

void Heartbeat::tick(jobs::Queue* queue) {
  const int64_t now = steady_ms();
  const RunStatus::Snapshot snap = status_.snapshot();
  const int64_t quiet = status_.quiet_ms();
  const bool stalled = quiet > stall_timeout_ms_.load();
  std::vector<int64_t> job_ids;
  for (const RunStatus::JobView& j : snap.jobs) job_ids.push_back(j.lease.job_id);
  if (stalled && !stall_reported_) {
    std::string ids;
    for (int64_t id : job_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    spdlog::error(
        "the worker has shown no progress for {} s (stall_timeout_ms {}): {}; not renewing leases "
        "or pinging the watchdog any more",
        quiet / 1000, stall_timeout_ms_.load(),
        ids.empty() ? std::string("no job is running")
                    : "job(s) " + ids + " will be taken over once their leases expire");
    notifier_.status("stalled: no progress for " + std::to_string(quiet / 1000) + " s");
  }
  stall_reported_ = stalled;

  // Forget jobs that ended; a job seen for the first time was just claimed,
  // which set its lease.
  std::erase_if(renewed_,
                [&](const auto& kv) { return std::find(job_ids.begin(), job_ids.end(), kv.first) == job_ids.end(); });
  if (queue != nullptr && !stalled) {
    const int64_t every = std::min<int64_t>(lease_ms_.load() / 3, progress_interval_ms_);
    for (const RunStatus::JobView& j : snap.jobs) {
      auto it = renewed_.find(j.lease.job_id);
      if (it == renewed_.end() || !same_lease(it->second.lease, j.lease)) {
        renewed_[j.lease.job_id] = {j.lease, now};
      } else if (now - it->second.last_ms >= every) {
        it->second.last_ms = now;
        renew(*queue, j);
      }
    }
  }

  if (notifier_.watchdog_period().count() > 0 && !stalled &&
      (now - last_watchdog_ms_) * 1000 >= notifier_.watchdog_period().count()) {
    last_watchdog_ms_ = now;
    notifier_.watchdog();
  }

  // Periodically, and at once when a job starts or ends.
  if (!stalled &&
      (now - last_status_ms_ >= status_interval_ms_ || job_ids != status_jobs_ || snap.problem != status_problem_)) {
    last_status_ms_ = now;
    status_jobs_ = job_ids;
    status_problem_ = snap.problem;
    std::optional<jobs::QueueCounts> counts;
    if (queue != nullptr) {
      try {
        counts = queue->counts();
        // The fleet's view of this daemon (`nightshift status`).
        if (!worker_id_.empty()) queue->worker_heartbeat(worker_id_, snap.loaded_model, job_ids, snap.problem);
      } catch (const Error& e) {
        spdlog::debug("heartbeat: cannot count the queue or update the workers row: {}", e.what());
      }
    }
    notifier_.status(status_line(snap, counts ? &*counts : nullptr));
  }

  if (on_tick_) on_tick_();
}

bool ended_by_recovery(const std::vector<jobs::AttemptRecord>& history, const jobs::Lease& lease) {
  for (const jobs::AttemptRecord& a : history) {
    if (a.attempt > lease.attempt) return true;  // claimed again since
    if (a.attempt == lease.attempt)
      return a.worker != lease.worker || a.outcome == "lease_expired" || a.outcome == "abandoned";
  }
  return true;  // no record of this attempt: not ours to keep
}

void Heartbeat::renew(jobs::Queue& queue, const RunStatus::JobView& job) {
  const jobs::Lease& lease = job.lease;
  jobs::JobProgress progress;
  progress.prompt_tokens = job.prompt_tokens;
  progress.prefilled = job.prefilled;
  progress.generated = job.generated;
  progress.tok_s = job.tok_s;
  if (job.eta_s >= 0) {  // as of this write, not of the token that set it
    const double age = std::chrono::duration<double>(std::chrono::steady_clock::now() - job.sampled).count();
    progress.eta_s = std::max(0.0, job.eta_s - age);
  }
  try {
    if (queue.heartbeat(lease, lease_ms_.load(), progress)) {
      ++renewals_;
      return;
    }
    ++refusals_;
    // The worker's own final write (done, failed, cancelled, released) may
    // land between the snapshot above and this renewal: the fence refuses
    // then too, and that is no take-over (seen 2 times in ~2,100 jobs).
    if (!ended_by_recovery(queue.attempts(lease.job_id), lease)) return;
    if (status_.mark_lease_lost(lease)) {
      spdlog::error(
          "job {}: the lease of attempt {} was taken over (it expired and another worker recovered the "
          "job); dropping this attempt",
          lease.job_id, lease.attempt);
    }
  } catch (const jobs::DatabaseError& e) {
    spdlog::warn("job {}: cannot renew the lease ({}); trying again in {} ms", lease.job_id, e.what(),
                 lease_ms_.load() / 3);
  }
}

}  // namespace ns::daemon
