#include "jobs/queue.h"

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

}  // namespace ns::jobs
