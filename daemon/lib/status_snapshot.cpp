#include "daemon/lib/status_snapshot.h"

#include <algorithm>
#include <limits>

#include "jobs/time_format.h"

namespace ns::daemon {

StatusSnapshot take_status(jobs::Queue& queue, const StatusRequest& r) {
  StatusSnapshot s;
  s.batch = r.batch;
  s.counts = r.batch.empty() ? queue.counts() : queue.counts(r.batch);
  jobs::ListFilter running;
  running.state = jobs::JobState::running;
  running.batch = r.batch;
  running.limit = 0;
  running.order = jobs::ListFilter::Order::oldest_first;
  s.running = queue.list(running);
  jobs::ListFilter recent;
  recent.batch = r.batch;
  recent.limit = r.recent_limit;
  recent.order = jobs::ListFilter::Order::recently_finished;
  if (r.recent_limit > 0) s.recent = queue.list(recent);
  if (r.batch_limit > 0) {
    // One batch: found among all of them (the interface has no lookup by name).
    s.batches = queue.batches(r.batch.empty() ? r.batch_limit : std::numeric_limits<int32_t>::max());
    if (!r.batch.empty()) std::erase_if(s.batches, [&](const jobs::BatchSummary& b) { return b.name != r.batch; });
    // The summary view keeps one held reason; a batch held for several causes gets each (held_reason_text).
    for (jobs::BatchSummary& b : s.batches) {
      if (b.counts.held > 0) b.counts.held_reason = queue.counts(b.name).held_reason;
    }
  }
  s.workers = queue.workers();
  s.now_ms = jobs::now_epoch_ms();
  if (r.totals) s.models = queue.model_totals();
  if (r.history_ms > 0 && r.bucket_ms > 0) {
    s.history_ms = r.history_ms;
    s.bucket_ms = r.bucket_ms;
    s.history = queue.token_history(s.now_ms - r.history_ms, r.bucket_ms);
  }
  for (jobs::JobState state : {jobs::JobState::failed, jobs::JobState::dead}) {
    if (r.failures <= 0) break;
    jobs::ListFilter failed;
    failed.state = state;
    failed.batch = r.batch;
    failed.limit = r.failures;
    failed.order = jobs::ListFilter::Order::recently_finished;
    for (jobs::Job& j : queue.list(failed)) s.failures.push_back(std::move(j));
  }
  std::sort(s.failures.begin(), s.failures.end(),
            [](const jobs::Job& a, const jobs::Job& b) { return a.finished_ms > b.finished_ms; });
  if (s.failures.size() > static_cast<size_t>(std::max(r.failures, 0)))
    s.failures.resize(static_cast<size_t>(r.failures));
  return s;
}

}  // namespace ns::daemon
