#include "jobs/queue.h"

#include <algorithm>

namespace ns::jobs {

const char* state_name(JobState s) {
  switch (s) {
    case JobState::queued: return "queued";
    case JobState::running: return "running";
    case JobState::done: return "done";
    case JobState::failed: return "failed";
    case JobState::cancelled: return "cancelled";
    case JobState::dead: return "dead";
  }
  return "queued";
}

std::optional<JobState> parse_state(const std::string& s) {
  for (JobState st : kAllJobStates) {
    if (s == state_name(st)) return st;
  }
  return std::nullopt;
}

std::optional<double> remaining_eta_s(const JobProgress& p, int64_t now_ms) {
  if (p.eta_s < 0 || p.updated_ms == 0) return std::nullopt;
  return std::max(0.0, p.eta_s - static_cast<double>(std::max<int64_t>(now_ms - p.updated_ms, 0)) / 1000.0);
}

std::string held_reason_text(const std::vector<HeldModel>& held) {
  if (held.size() == 1) return held[0].reason;
  std::string text;
  for (const HeldModel& h : held) {
    text += (text.empty() ? "" : "; ") + std::string("model ") + h.model + ", " + std::to_string(h.jobs) +
            (h.jobs == 1 ? " job: " : " jobs: ") + h.reason;
  }
  return text;
}

}  // namespace ns::jobs
