// The systemd notification protocol on a real datagram socket, as systemd
// would receive it: READY/STATUS/WATCHDOG/RELOADING/STOPPING from the
// notifier, and the heartbeat's periodic STATUS= and WATCHDOG=1.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/lib/heartbeat.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;

namespace {

// A bound AF_UNIX datagram socket standing in for systemd, with $NOTIFY_SOCKET
// (and optionally the watchdog variables) pointing at it while it lives.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path, const char* watchdog_usec = nullptr,
                        const char* watchdog_pid = nullptr)
      : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::strcpy(addr.sun_path, path.c_str());
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    timeval tv{0, 20'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
    set_or_unset("WATCHDOG_USEC", watchdog_usec);
    set_or_unset("WATCHDOG_PID", watchdog_pid);
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(fd_);
  }

  // Every datagram that arrives within `ms`.
  std::vector<std::string> receive(int ms) {
    std::vector<std::string> got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    char buf[4096];
    while (std::chrono::steady_clock::now() < until) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) got.emplace_back(buf, static_cast<size_t>(n));
    }
    return got;
  }

 private:
  static void set_or_unset(const char* name, const char* value) {
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  std::string path_;
  int fd_ = -1;
};

int count_with(const std::vector<std::string>& messages, const std::string& needle) {
  int n = 0;
  for (const std::string& m : messages) n += m.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("the notifier sends the sd_notify messages systemd expects") {
  test::TempDir dir;
  NotifySocket sock(dir.file("notify"), "400000");
  const daemon::ServiceNotifier n;
  CHECK(n.enabled());
  CHECK(n.watchdog_period() == std::chrono::microseconds(200'000));  // half of WatchdogSec
  n.ready("idle; 3 queued\nsecond line");
  n.status("job 7 (tiny): 10/400 tokens");
  n.watchdog();
  n.reloading();
  n.stopping("draining after SIGTERM");
  const std::vector<std::string> got = sock.receive(100);
  REQUIRE(got.size() == 5);
  CHECK(got[0] == "READY=1\nSTATUS=idle; 3 queued second line");
  CHECK(got[1] == "STATUS=job 7 (tiny): 10/400 tokens");
  CHECK(got[2] == "WATCHDOG=1");
  CHECK(got[3].find("RELOADING=1") == 0);
  CHECK(got[4] == "STOPPING=1\nSTATUS=draining after SIGTERM");
}

TEST_CASE("without systemd the notifier is silent; a watchdog meant for another process is ignored") {
  unsetenv("NOTIFY_SOCKET");
  const daemon::ServiceNotifier off;
  CHECK_FALSE(off.enabled());
  off.ready("nobody listens");  // must not fail

  test::TempDir dir;
  NotifySocket sock(dir.file("notify"), "400000", "1");  // WATCHDOG_PID = 1: not us
  const daemon::ServiceNotifier n;
  CHECK(n.enabled());
  CHECK(n.watchdog_period().count() == 0);
}

TEST_CASE("the heartbeat feeds the watchdog and reports the queue in STATUS=") {
  spdlog::set_level(spdlog::level::off);
  test::TempDir dir;
  const std::string db = dir.file("q.db");
  {
    auto q = jobs::open_sqlite_queue(db, test::kFastCommits);
    q->submit(test::job_spec("tiny", "p"));
    q->submit(test::job_spec("tiny", "p"));
  }
  NotifySocket sock(dir.file("notify"), "100000");  // WatchdogSec=100ms: a ping every 50 ms
  const daemon::ServiceNotifier notifier;
  daemon::RunStatus status;
  std::vector<std::string> got;
  {
    daemon::Heartbeat heartbeat([&] { return jobs::open_sqlite_queue(db, test::kFastCommits); }, status, notifier,
                                {.lease_ms = 60'000,
                                 .stall_timeout_ms = 60'000,
                                 .status_interval_ms = 100,
                                 .progress_interval_ms = 5000,
                                 .tick_ms = 10,
                                 .worker_id = ""});
    // Waits for the messages, not a fixed window: under TSan on a loaded machine 400 ms held only 4 pings.
    // The 60 s bound only ends a failing run.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((count_with(got, "WATCHDOG=1") < 5 || count_with(got, "STATUS=idle; 2 queued") < 2) &&
           std::chrono::steady_clock::now() < until) {
      status.touch();  // the worker is alive
      for (std::string& m : sock.receive(20)) got.push_back(std::move(m));
    }
  }
  MESSAGE(got.size() << " messages");
  CHECK(count_with(got, "WATCHDOG=1") >= 5);
  CHECK(count_with(got, "STATUS=idle; 2 queued") >= 2);
}

TEST_CASE("a stalled worker stops feeding the watchdog") {
  spdlog::set_level(spdlog::level::off);
  test::TempDir dir;
  const std::string db = dir.file("q.db");
  jobs::open_sqlite_queue(db, test::kFastCommits);
  NotifySocket sock(dir.file("notify"), "100000");
  const daemon::ServiceNotifier notifier;
  daemon::RunStatus status;
  daemon::Heartbeat heartbeat([&] { return jobs::open_sqlite_queue(db, test::kFastCommits); }, status, notifier,
                              {.lease_ms = 60'000,
                               .stall_timeout_ms = 100,
                               .status_interval_ms = 1000,
                               .progress_interval_ms = 5000,
                               .tick_ms = 10,
                               .worker_id = ""});
  std::vector<std::string> got = sock.receive(150);  // no touch(): quiet for longer than 100 ms
  got = sock.receive(300);
  CHECK(count_with(got, "WATCHDOG=1") == 0);
  CHECK(count_with(got, "STATUS=stalled") <= 1);
  status.touch();
  got = sock.receive(150);
  CHECK(count_with(got, "WATCHDOG=1") >= 1);
}

TEST_CASE("status_line says what runs, how fast, and what waits") {
  daemon::RunStatus status;
  jobs::QueueCounts counts;
  counts.queued = 17;
  counts.running = 2;
  CHECK(daemon::status_line(status.snapshot(), &counts) ==
        "idle; 17 queued, 2 running elsewhere; 0 finished since start");
  status.start_job({42, "w", 3}, "tiny", 400, 96);
  status.progress(42, 10, 10, 120, 35.25);
  CHECK(daemon::status_line(status.snapshot(), &counts) ==
        "job 42 (tiny): 120/400 tokens (resumed at 96), 35.2 tok/s; 17 queued, 1 running elsewhere; 0 finished since "
        "start");
  CHECK_FALSE(status.mark_lease_lost({42, "w", 2}));  // an older attempt: not news
  CHECK_FALSE(status.lease_lost(42));
  CHECK(status.mark_lease_lost({42, "w", 3}));
  CHECK(status.lease_lost(42));
  // A batch: each job's own progress, their summed rate.
  status.start_job({43, "w", 1}, "tiny", 64, 0);
  status.progress(43, 512, 96, 0, 0);
  CHECK_FALSE(status.lease_lost(43));
  CHECK(daemon::status_line(status.snapshot(), &counts) ==
        "2 jobs (tiny): 42 120/400, 43 prefill 96/512; 35.2 tok/s; 17 queued; 0 finished since start");
  status.end_job(42);
  CHECK_FALSE(status.lease_lost(42));
  status.end_job(43);
  CHECK(daemon::status_line(status.snapshot(), nullptr) == "idle; 2 finished since start");
}
