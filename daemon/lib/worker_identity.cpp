// One worker_id, one live daemon (contract in daemon/lib/worker_identity.h).
#include "daemon/lib/worker_identity.h"

#include <fstream>

namespace ns::daemon {

std::string worker_id_conflict(const std::vector<jobs::WorkerInfo>& workers, const Self& self, int64_t now_ms,
                               int64_t lease_ms, const std::function<bool(int64_t)>& runs_nightshiftd) {
  for (const jobs::WorkerInfo& w : workers) {
    if (w.id != self.worker_id || w.stopped_ms != 0) continue;
    if (w.host == self.host && w.pid == self.pid) continue;  // this very process (registered already)
    const int64_t age = now_ms - w.heartbeat_ms;
    const bool alive = w.host == self.host ? runs_nightshiftd(w.pid) : age < lease_ms;
    if (!alive) continue;
    std::string msg = "worker_id '" + self.worker_id + "' is in use by a running nightshiftd (pid " +
                      std::to_string(w.pid) + " on host " + w.host + ", last heartbeat " + std::to_string(age) +
                      " ms ago): two daemons under one worker_id would take each other's jobs. Give this daemon a "
                      "worker_id of its own in " +
                      self.config_path +
                      " (or remove the line: the default, hostname:pid, is unique), or stop the other one";
    if (w.host != self.host)
      msg += "; if it is dead, its heartbeat is older than lease_ms (" + std::to_string(lease_ms) + " ms) in at most " +
             std::to_string(lease_ms - age) + " ms, then this daemon may start";
    return msg;
  }
  return "";
}

bool pid_runs_nightshiftd(int64_t pid) {
  if (pid <= 0) return false;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return comm && std::getline(comm, name) && name == "nightshiftd";
}

}  // namespace ns::daemon
