// What `nightshift status` and `nightshift watch` show: the queue's counts,
// the running jobs with their progress (tokens done / max, tok/s, ETA), the
// last finished jobs, the batches and the daemons (the fleet).
//
// take_status() reads the queue (daemon/lib/status_snapshot.h); the format_*
// functions are pure, so what people see is tested without a daemon.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/lib/status_snapshot.h"
#include "jobs/queue.h"

namespace ns::cli {

// The snapshot is read in daemon/lib (status_snapshot.h), where a server reads it too.
using daemon::StatusSnapshot;

// recent_limit / batch_limit: how many finished jobs and batches to read (0:
// none, e.g. for one-line output); with `batch`, only that batch is listed.
StatusSnapshot take_status(jobs::Queue& queue, const std::string& batch, int recent_limit, int batch_limit);

struct StatusStyle {
  bool bars = false;  // progress bars (a terminal)
  int width = 100;    // terminal columns
  // Terminal rows the report must fit in (`watch`'s screen); 0 = as long as
  // it takes (`status`). With rows, every line fits `width` and the report
  // takes at most `height` lines: one line per running job, and the sections
  // cut to what fits ("... 3 more").
  int height = 0;
};

// The snapshot with every text field (names of batches, models, workers,
// custom_ids, prompts, outputs, errors) passed through the one sanitiser,
// daemon::escape_controls: C0, DEL and C1 controls shown as "\x9b" text.
// format_status and format_status_line apply it themselves.
StatusSnapshot for_terminal(const StatusSnapshot& s);

// The full report, several sections, ending with a newline.
std::string format_status(const StatusSnapshot& s, const StatusStyle& style);

// A daemon's batch as its running jobs' progress shows it: how many, their
// summed decode rate (the batch's tok/s) and when the last of them ends (to
// max_tokens, counted down from each job's last progress report).
struct DaemonBatch {
  int jobs = 0;
  double tok_s = 0;
  std::optional<double> eta_s;  // nullopt: a job's ETA is not known yet
};
DaemonBatch daemon_batch(const StatusSnapshot& s, const std::string& worker_id);
// "4 jobs, 92.31 tok/s, ETA 3m10s" ("" when the daemon runs none).
std::string daemon_batch_text(const DaemonBatch& b);

// One line (no newline) for logs and pipes: UTC time, the counts, each running job's progress, the daemons'
// batches and each named batch still running with its finished count and ETA.
std::string format_status_line(const StatusSnapshot& s);

// One running job's progress: "prefill 512/4096 prompt tok, ETA 1m02s" or
// "37/200 tok, 3.10 tok/s, ETA 52s"; "waiting for its first progress report"
// before any. The ETA is the daemon's estimate counted down to now_ms
// (jobs::remaining_eta_s), so it falls between heartbeats.
std::string job_progress_text(const jobs::Job& job, int64_t now_ms);

// A daemon's state: "up 3h02m", "stopped 2h05m ago", "silent for 12m (crashed or hung?)".
std::string worker_state_text(const jobs::WorkerInfo& w, int64_t now_ms);

nlohmann::json status_to_json(const StatusSnapshot& s);

// What held jobs (jobs::is_held) wait for and the one command that moves
// them, for `status`, `watch` and `list`: "" when none is held, else two
// lines without a newline at the end:
//   held: 3 job(s) of batch B: model 'chta': model 'chta' is not in the daemon's config ...
//   fix the daemon's config (then reload it: SIGHUP), or re-point them: nightshift retry --batch B --model NAME
// `batch` "" = the whole queue (the command then names no batch).
std::string held_text(const jobs::QueueCounts& c, const std::string& batch);

// Nothing queued or running (in the snapshot's batch, if any).
inline bool queue_idle(const StatusSnapshot& s) { return s.counts.queued == 0 && s.counts.running == 0; }

}  // namespace ns::cli
