// A batch's ETA (contract in jobs/batch_eta.h). The SQL views compute the same: change them together.
#include "jobs/batch_eta.h"

#include <algorithm>

namespace ns::jobs {

std::optional<double> batch_eta_s(const BatchProgress& p, int64_t now_ms) {
  if (p.queued + p.running == 0 || p.first_started_ms == 0) return std::nullopt;
  const double produced = static_cast<double>(p.result_tokens + p.running_generated);
  const double active_s = (static_cast<double>(now_ms - p.first_started_ms) - p.load_ms) / 1000.0;
  if (produced <= 0 || active_s <= 0) return std::nullopt;
  const double rate = produced / active_s;
  // A job's expected output: the done jobs' mean, capped at the job's max_tokens (their mean here).
  const double mean = p.done > 0 ? static_cast<double>(p.done_tokens) / static_cast<double>(p.done) : 1e300;
  const double queued_each =
      p.queued > 0 ? std::min(mean, static_cast<double>(p.queued_max_tokens) / static_cast<double>(p.queued)) : 0;
  const double running_each =
      p.running > 0 ? std::min(mean, static_cast<double>(p.running_max_tokens) / static_cast<double>(p.running)) : 0;
  const double left =
      static_cast<double>(p.queued) * queued_each +
      std::max(static_cast<double>(p.running) * running_each - static_cast<double>(p.running_generated), 0.0);
  return left / rate;
}

}  // namespace ns::jobs
