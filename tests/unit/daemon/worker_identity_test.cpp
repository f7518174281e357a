// worker_id_conflict (daemon/lib/worker_identity.h): a second daemon under a
// live daemon's worker_id is refused, naming it; a dead or stopped one's id is free.
#include <doctest/doctest.h>

#include <unistd.h>

#include "daemon/lib/worker_identity.h"

namespace {

using ns::daemon::Self;
using ns::daemon::worker_id_conflict;
using ns::jobs::WorkerInfo;

WorkerInfo row(const std::string& id, const std::string& host, int64_t pid, int64_t heartbeat_ms,
               int64_t stopped_ms = 0) {
  WorkerInfo w;
  w.id = id;
  w.host = host;
  w.pid = pid;
  w.heartbeat_ms = heartbeat_ms;
  w.stopped_ms = stopped_ms;
  return w;
}

const Self kMe{"night", "box", "/etc/nightshift/config.yaml", 200};
constexpr int64_t kNow = 1'000'000, kLease = 30'000;
bool alive_100(int64_t pid) { return pid == 100; }

}  // namespace

TEST_CASE("a live daemon on this host holds its worker_id; a crashed or stopped one's is free") {
  const std::string msg = worker_id_conflict({row("night", "box", 100, kNow - 60'000)}, kMe, kNow, kLease, alive_100);
  CHECK_MESSAGE(msg.find("worker_id 'night' is in use by a running nightshiftd (pid 100 on host box") == 0, msg);
  CHECK_MESSAGE(msg.find("/etc/nightshift/config.yaml") != std::string::npos, msg);
  // Same host: the pid decides, not the heartbeat (a busy daemon may beat late, a crashed one's pid is gone).
  CHECK(worker_id_conflict({row("night", "box", 101, kNow)}, kMe, kNow, kLease, alive_100).empty());
  CHECK(worker_id_conflict({row("night", "box", 100, kNow, kNow - 5)}, kMe, kNow, kLease, alive_100).empty());
  CHECK(worker_id_conflict({row("day", "box", 100, kNow)}, kMe, kNow, kLease, alive_100).empty());
  CHECK(worker_id_conflict({row("night", "box", 200, kNow)}, kMe, kNow, kLease, alive_100).empty());  // itself
}

TEST_CASE("on another host a worker_id is held while its heartbeat is younger than the lease") {
  const std::string msg = worker_id_conflict({row("night", "other", 100, kNow - 10'000)}, kMe, kNow, kLease, alive_100);
  CHECK_MESSAGE(msg.find("pid 100 on host other, last heartbeat 10000 ms ago") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("in at most 20000 ms, then this daemon may start") != std::string::npos, msg);
  CHECK(worker_id_conflict({row("night", "other", 100, kNow - 30'000)}, kMe, kNow, kLease, alive_100).empty());
}

TEST_CASE("pid_runs_nightshiftd reads the process name") {
  CHECK_FALSE(ns::daemon::pid_runs_nightshiftd(getpid()));  // this is a test binary
  CHECK_FALSE(ns::daemon::pid_runs_nightshiftd(0));
  CHECK_FALSE(ns::daemon::pid_runs_nightshiftd(1'999'999'999));
}
