// What the queue looks like now, read once for every view of it: `nightshift
// status` / `watch` / `status --json` (daemon/cli/status_view.h), the
// Prometheus text (metrics_text.h) and the status page (status_page.h), so a
// CLI and a server show the same data. take_status() reads; the views are
// pure functions of the snapshot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::daemon {

struct StatusSnapshot {
  int64_t now_ms = 0;
  std::string batch;  // "" = the whole queue
  jobs::QueueCounts counts;
  std::vector<jobs::Job> running;           // oldest first
  std::vector<jobs::Job> recent;            // last finished, newest first
  std::vector<jobs::BatchSummary> batches;  // newest first (only the one named when `batch` is set)
  std::vector<jobs::WorkerInfo> workers;
  // With StatusRequest::totals: every model's jobs and result totals (the whole queue, whatever `batch`).
  std::vector<jobs::ModelTotals> models;
  // With StatusRequest::history_ms: the results finished since now - history_ms, per bucket_ms.
  std::vector<jobs::TokenBucket> history;
  int64_t history_ms = 0, bucket_ms = 0;
  // With StatusRequest::failures: the last failed or dead jobs, newest first.
  std::vector<jobs::Job> failures;
};

struct StatusRequest {
  std::string batch;                      // "" = the whole queue; else only that batch's jobs and summary
  int recent_limit = 5;                   // finished jobs to read (0: none)
  int batch_limit = 10;                   // batches to read (0: none)
  bool totals = false;                    // read StatusSnapshot::models
  int64_t history_ms = 0, bucket_ms = 0;  // > 0: read StatusSnapshot::history
  int failures = 0;                       // failed or dead jobs to read
};

// A daemon heartbeats every few seconds while it runs; one quiet for this
// long has most likely died without saying so (kill -9, power cut).
inline constexpr int64_t kWorkerSilentMs = 3 * 60 * 1000;
// Running: not stopped, and its heartbeat within kWorkerSilentMs of now_ms.
inline bool worker_live(const jobs::WorkerInfo& w, int64_t now_ms) {
  return w.stopped_ms == 0 && now_ms - w.heartbeat_ms <= kWorkerSilentMs;
}

// One short read per part. Throws jobs::DatabaseError.
StatusSnapshot take_status(jobs::Queue& queue, const StatusRequest& request);

}  // namespace ns::daemon
