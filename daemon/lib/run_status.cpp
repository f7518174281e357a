#include "daemon/lib/run_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace ns::daemon {

void RunStatus::start_job(const jobs::Lease& lease, const std::string& model, int32_t max_tokens, int32_t resumed) {
  std::lock_guard lock(mu_);
  std::erase_if(s_.jobs, [&](const JobView& j) { return j.lease.job_id == lease.job_id; });
  JobView j;
  j.lease = lease;
  j.max_tokens = max_tokens;
  j.resumed = resumed;
  j.generated = resumed;
  s_.jobs.push_back(j);
  s_.model = model;
  std::erase(lost_, lease.job_id);
  lost_count_ = static_cast<int>(lost_.size());
}

template <class F>
void RunStatus::update(int64_t job_id, F&& change) {
  std::lock_guard lock(mu_);
  for (JobView& j : s_.jobs)
    if (j.lease.job_id == job_id) change(j);
}

void RunStatus::progress(int64_t job_id, int32_t prompt_tokens, int32_t prefilled, int32_t generated, double tok_s) {
  update(job_id, [&](JobView& j) {
    j.prompt_tokens = prompt_tokens;
    j.prefilled = prefilled;
    j.generated = generated;
    j.tok_s = tok_s;
  });
}

void RunStatus::estimate(int64_t job_id, double tok_s, double eta_s) {
  const auto now = std::chrono::steady_clock::now();
  update(job_id, [&](JobView& j) {
    j.tok_s = tok_s;
    j.eta_s = eta_s;
    j.sampled = now;
  });
}

void RunStatus::end_job(int64_t job_id) {
  std::lock_guard lock(mu_);
  const size_t before = s_.jobs.size();
  std::erase_if(s_.jobs, [&](const JobView& j) { return j.lease.job_id == job_id; });
  if (s_.jobs.size() != before) ++s_.jobs_finished;
  if (s_.jobs.empty()) s_.model.clear();
  std::erase(lost_, job_id);
  lost_count_ = static_cast<int>(lost_.size());
}

void RunStatus::set_loaded_model(const std::string& model) {
  std::lock_guard lock(mu_);
  s_.loaded_model = model;
}

void RunStatus::set_problem(const std::string& problem) {
  std::lock_guard lock(mu_);
  s_.problem = problem;
}

RunStatus::Snapshot RunStatus::snapshot() const {
  std::lock_guard lock(mu_);
  return s_;
}

bool RunStatus::mark_lease_lost(const jobs::Lease& lease) {
  std::lock_guard lock(mu_);
  const bool running = std::any_of(s_.jobs.begin(), s_.jobs.end(), [&](const JobView& j) {
    return j.lease.job_id == lease.job_id && j.lease.attempt == lease.attempt && j.lease.worker == lease.worker;
  });
  if (!running) return false;
  if (std::find(lost_.begin(), lost_.end(), lease.job_id) == lost_.end()) lost_.push_back(lease.job_id);
  lost_count_ = static_cast<int>(lost_.size());
  return true;
}

bool RunStatus::lease_lost(int64_t job_id) const {
  if (lost_count_.load() == 0) return false;
  std::lock_guard lock(mu_);
  return std::find(lost_.begin(), lost_.end(), job_id) != lost_.end();
}

int64_t RunStatus::now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

void RunStatus::touch() { last_touch_ms_ = now_ms(); }
int64_t RunStatus::quiet_ms() const { return now_ms() - last_touch_ms_.load(); }

std::string status_line(const RunStatus::Snapshot& s, const jobs::QueueCounts* counts) {
  std::string line;
  const size_t n = s.jobs.size();
  if (n == 1) {
    const RunStatus::JobView& j = s.jobs.front();
    line = fmt::format("job {} ({}): {}/{} tokens", j.lease.job_id, s.model, j.generated, j.max_tokens);
    if (j.resumed > 0) line += fmt::format(" (resumed at {})", j.resumed);
    if (j.tok_s > 0) line += fmt::format(", {:.1f} tok/s", j.tok_s);
  } else if (n > 1) {
    line = fmt::format("{} jobs ({}):", n, s.model);
    double tok_s = 0;
    for (size_t i = 0; i < n; ++i) {
      const RunStatus::JobView& j = s.jobs[i];
      if (j.prompt_tokens > 0 && j.prefilled < j.prompt_tokens) {
        line += fmt::format("{} {} prefill {}/{}", i == 0 ? "" : ",", j.lease.job_id, j.prefilled, j.prompt_tokens);
      } else {
        line += fmt::format("{} {} {}/{}", i == 0 ? "" : ",", j.lease.job_id, j.generated, j.max_tokens);
      }
      tok_s += j.tok_s;
    }
    if (tok_s > 0) line += fmt::format("; {:.1f} tok/s", tok_s);
  } else {
    line = "idle";
  }
  if (counts != nullptr) {
    const int64_t mine = static_cast<int64_t>(n);
    line += fmt::format("; {} queued", counts->queued);
    if (counts->running > mine) line += fmt::format(", {} running elsewhere", counts->running - mine);
  }
  line += fmt::format("; {} finished since start", s.jobs_finished);
  if (!s.problem.empty()) line += "; CANNOT SERVE: " + s.problem;
  return line;
}

}  // namespace ns::daemon
