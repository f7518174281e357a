// One worker_id, one live daemon. A worker_id names the daemon in every
// lease; a second daemon started under the same id would take the first's
// running jobs back at start-up as "abandoned" (recover_worker) and both
// would then write under one name. So a daemon refuses to start while its
// id is held by another that is alive.
//
// Contract: "alive" is decided from the workers row of that id:
//  - stopped (a clean exit wrote stopped_ms): free;
//  - on this host: alive while its pid runs a process named nightshiftd
//    (a crashed daemon's pid is gone or reused by something else);
//  - on another host: alive while its last heartbeat is younger than
//    lease_ms (a live daemon beats at least every lease_ms / 3), by this
//    host's clock (PostgreSQL stamps with the server's: keep clocks in sync).
// The daemon asks inside the transaction that registers it
// (Queue::register_worker's objection), so two daemons started in the same
// instant cannot both pass.
// The answer is the message to refuse with, naming the other daemon and the
// fix; empty when the id is free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::daemon {

struct Self {
  std::string worker_id, host, config_path;
  int64_t pid = 0;
};

// `now_ms`: the clock heartbeat_ms was written with. `runs_nightshiftd(pid)`:
// whether that pid on this host is a live nightshiftd.
std::string worker_id_conflict(const std::vector<jobs::WorkerInfo>& workers, const Self& self, int64_t now_ms,
                               int64_t lease_ms, const std::function<bool(int64_t)>& runs_nightshiftd);

// /proc/PID/comm says nightshiftd.
bool pid_runs_nightshiftd(int64_t pid);

}  // namespace ns::daemon
