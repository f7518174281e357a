#include "daemon/lib/run_status.h"

#include <fmt/format.h>

#include <chrono>

namespace ns::daemon {

void RunStatus::start_job(const jobs::Lease& lease, const std::string& model, int32_t max_tokens, int32_t resumed) {
  std::lock_guard lock(mu_);
  s_.lease = lease;
  s_.model = model;
  s_.max_tokens = max_tokens;
  s_.resumed = resumed;
  s_.generated = resumed;
  s_.tok_s = 0;
  lease_lost_ = false;
}

void RunStatus::progress(int32_t generated, double tok_s) {
  std::lock_guard lock(mu_);
  s_.generated = generated;
  s_.tok_s = tok_s;
}

void RunStatus::end_job() {
  std::lock_guard lock(mu_);
  s_.lease.reset();
  s_.model.clear();
  s_.generated = s_.max_tokens = s_.resumed = 0;
  s_.tok_s = 0;
  ++s_.jobs_finished;
  lease_lost_ = false;
}

RunStatus::Snapshot RunStatus::snapshot() const {
  std::lock_guard lock(mu_);
  return s_;
}

bool RunStatus::mark_lease_lost(const jobs::Lease& lease) {
  std::lock_guard lock(mu_);
  if (!s_.lease || s_.lease->job_id != lease.job_id || s_.lease->attempt != lease.attempt ||
      s_.lease->worker != lease.worker) {
    return false;
  }
  lease_lost_ = true;
  return true;
}

int64_t RunStatus::now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

void RunStatus::touch() { last_touch_ms_ = now_ms(); }
int64_t RunStatus::quiet_ms() const { return now_ms() - last_touch_ms_.load(); }

std::string status_line(const RunStatus::Snapshot& s, const jobs::QueueCounts* counts) {
  std::string line;
  if (s.lease) {
    line = fmt::format("job {} ({}): {}/{} tokens", s.lease->job_id, s.model, s.generated, s.max_tokens);
    if (s.resumed > 0) line += fmt::format(" (resumed at {})", s.resumed);
    if (s.tok_s > 0) line += fmt::format(", {:.1f} tok/s", s.tok_s);
  } else {
    line = "idle";
  }
  if (counts != nullptr) {
    line += fmt::format("; {} queued", counts->queued);
    if (counts->running > (s.lease ? 1 : 0)) line += fmt::format(", {} running elsewhere", counts->running - (s.lease ? 1 : 0));
  }
  line += fmt::format("; {} finished since start", s.jobs_finished);
  return line;
}

}  // namespace ns::daemon
