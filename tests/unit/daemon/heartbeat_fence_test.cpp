// The heartbeat's reading of a refused renewal: a lease the worker's own final
// write ended (the job finished between the heartbeat's snapshot and its
// renewal) is not a take-over and must not be reported as one; a lease
// another daemon recovered is. Before, both logged "the lease of attempt N
// was taken over", 2 times in ~2,100 jobs, just after a normal completion.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "daemon/lib/heartbeat.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;

namespace {

// Runs a heartbeat until it has had `n` renewals refused (state, not time).
bool refused(const std::string& db, daemon::RunStatus& status, int64_t n) {
  const daemon::ServiceNotifier notifier;
  daemon::Heartbeat heartbeat([&] { return jobs::open_sqlite_queue(db, test::kFastCommits); }, status, notifier,
                              {.lease_ms = 30,
                               .stall_timeout_ms = 60'000,
                               .status_interval_ms = 1000,
                               .progress_interval_ms = 5000,
                               .tick_ms = 5,
                               .worker_id = ""});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (heartbeat.refusals() < n && std::chrono::steady_clock::now() < until) {
    status.touch();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return heartbeat.refusals() >= n;
}

}  // namespace

TEST_CASE("a renewal refused because the worker's own final write landed first is no take-over") {
  spdlog::set_level(spdlog::level::off);
  test::TempDir dir;
  const std::string db = dir.file("q.db");
  auto q = jobs::open_sqlite_queue(db, test::kFastCommits);
  const int64_t id = q->submit(test::job_spec("tiny", "p")).id;
  const jobs::Lease lease = q->claim("w", 60'000)->lease();
  daemon::RunStatus status;
  status.start_job(lease, "tiny", 10, 0);  // the heartbeat still sees it: the worker has not removed it yet

  SUBCASE("completed by its own worker") {
    jobs::JobResult r{.text = "t", .finish_reason = "stop"};
    REQUIRE(q->complete(lease, r));
    REQUIRE(refused(db, status, 2));
    CHECK_FALSE(status.lease_lost(id));
  }
  SUBCASE("released by its own worker") {
    REQUIRE(q->release(lease));
    REQUIRE(refused(db, status, 2));
    CHECK_FALSE(status.lease_lost(id));
  }
  SUBCASE("recovered by another daemon") {
    REQUIRE(q->recover_worker("w", {0, 0}).requeued == 1);  // as a daemon taking a dead worker's jobs
    REQUIRE(refused(db, status, 1));
    CHECK(status.lease_lost(id));
  }
  SUBCASE("recovered and claimed again") {
    REQUIRE(q->recover_worker("w", {0, 0}).requeued == 1);
    REQUIRE(q->claim("rival", 60'000));
    REQUIRE(refused(db, status, 1));
    CHECK(status.lease_lost(id));
  }
}
