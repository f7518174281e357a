// Several connections on one file at once (as the daemon and CLI processes
// are): no job is claimed twice, none is lost, concurrent openers migrate once.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns::jobs;

namespace {

// These tests are about locking, not durability: commits without fsync keep
// them fast (sqlite_schema_test.cpp checks the durable default).
const SqliteOptions kNoFsync = ns::test::kFastCommits;
constexpr int64_t kLeaseMs = 60'000;

JobSpec spec(int i) {
  JobSpec s;
  s.model = "tiny";
  s.prompt = "prompt " + std::to_string(i);
  s.priority = i % 3;
  return s;
}

// Claims until the queue stays empty, completing each job; returns the ids it got.
// `start` lines the threads up after their (slow) open, so they really race.
std::vector<int64_t> drain(const std::string& path, const std::string& worker, const std::atomic<bool>& producers_done,
                           std::latch& start) {
  auto q = open_sqlite_queue(path, kNoFsync);
  start.arrive_and_wait();
  std::vector<int64_t> got;
  JobResult r;
  r.text = worker;
  r.finish_reason = "stop";
  while (true) {
    // Read the flag before claiming: an empty claim after the producers were
    // done means nothing is left.
    const bool last_round = producers_done.load();
    if (std::optional<Job> j = q->claim(worker, kLeaseMs)) {
      got.push_back(j->id);
      if (!q->complete(j->lease(), r)) got.push_back(-j->id);  // a broken fence shows up as a negative id
    } else if (last_round) {
      break;
    } else {
      std::this_thread::yield();
    }
  }
  return got;
}

}  // namespace

TEST_CASE("two workers with their own connections never claim the same job") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  constexpr int kJobs = 200;
  {
    auto q = open_sqlite_queue(path, kNoFsync);
    for (int i = 0; i < kJobs; ++i) q->submit(spec(i));
  }
  std::atomic<bool> done{true};
  std::latch start(2);
  std::vector<int64_t> a, b;
  std::thread ta([&] { a = drain(path, "worker-a", done, start); });
  std::thread tb([&] { b = drain(path, "worker-b", done, start); });
  ta.join();
  tb.join();

  std::vector<int64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::set<int64_t> unique(all.begin(), all.end());
  CHECK(all.size() == kJobs);
  CHECK(unique.size() == kJobs);
  MESSAGE("worker-a claimed " << a.size() << ", worker-b " << b.size());

  auto q = open_sqlite_queue(path, kNoFsync);
  CHECK(q->counts().done == kJobs);
  // Each row names the worker that really completed it.
  ListFilter done_jobs;
  done_jobs.state = JobState::done;
  done_jobs.limit = 0;
  for (const Job& j : q->list(done_jobs)) {
    REQUIRE(j.result);
    CHECK(j.result->text == j.worker);
    CHECK(j.attempts == 1);
  }
}

TEST_CASE("submitters and workers running at the same time lose nothing") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  open_sqlite_queue(path, kNoFsync);  // create the schema before the race
  constexpr int kPerProducer = 100;
  std::atomic<bool> producers_done{false};
  std::vector<int64_t> submitted_a, submitted_b, got_a, got_b;

  std::latch start(4);
  auto produce = [&](std::vector<int64_t>& out, int base) {
    auto q = open_sqlite_queue(path, kNoFsync);
    start.arrive_and_wait();
    for (int i = 0; i < kPerProducer; ++i) out.push_back(q->submit(spec(base + i)).id);
  };
  std::thread wa([&] { got_a = drain(path, "a", producers_done, start); });
  std::thread wb([&] { got_b = drain(path, "b", producers_done, start); });
  std::thread pa([&] { produce(submitted_a, 0); });
  std::thread pb([&] { produce(submitted_b, 1000); });
  pa.join();
  pb.join();
  producers_done = true;
  wa.join();
  wb.join();

  std::set<int64_t> submitted(submitted_a.begin(), submitted_a.end());
  submitted.insert(submitted_b.begin(), submitted_b.end());
  std::vector<int64_t> got = got_a;
  got.insert(got.end(), got_b.begin(), got_b.end());
  std::set<int64_t> got_unique(got.begin(), got.end());
  CHECK(submitted.size() == 2 * kPerProducer);
  CHECK(got.size() == got_unique.size());
  CHECK(got_unique == submitted);
  MESSAGE("worker a claimed " << got_a.size() << ", worker b " << got_b.size());
}

TEST_CASE("connections opening a new file at once apply the migrations exactly once") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  std::atomic<int> applied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      sqlite::Db db(path);
      applied += sqlite::migrate(db);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(applied.load() == sqlite::latest_schema_version());
  sqlite::Db db(path);
  CHECK(db.scalar_int("PRAGMA user_version") == sqlite::latest_schema_version());
}

TEST_CASE("four processes submitting and claiming at once: none lost, none duplicated") {
  // The mission's queue figure, scaled down to stay fast: separate processes,
  // as the CLI and daemons are, each submitting and then claiming.
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  open_sqlite_queue(path, kNoFsync);
  constexpr int kProcesses = 4, kPerProcess = 150;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        auto q = open_sqlite_queue(path, kNoFsync);
        for (int i = 0; i < kPerProcess; ++i) q->submit(spec(p * 1000 + i));
        JobResult r;
        r.finish_reason = "stop";
        while (std::optional<Job> j = q->claim("process-" + std::to_string(p), kLeaseMs)) {
          r.text = j->worker;
          if (!q->complete(j->lease(), r)) status = 1;
        }
      } catch (...) {
        status = 1;
      }
      _exit(status);  // never return into the test runner
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  sqlite::Db db(path);
  CHECK(db.scalar_int("SELECT count(*) FROM jobs") == kProcesses * kPerProcess);
  CHECK(db.scalar_int("SELECT count(*) FROM jobs WHERE state = 'done' AND attempts = 1") == kProcesses * kPerProcess);
  CHECK(db.scalar_int("SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE r.text = j.worker") ==
        kProcesses * kPerProcess);
}
