// Several connections on one database at once (as the daemon and CLI
// processes are), on both backends (tests/unit/jobs/backends.h): no job is
// claimed twice, none is lost, concurrent openers migrate once.
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
#include "tests/unit/jobs/backends.h"

using namespace ns::jobs;

namespace {

// (These tests are about locking, not durability: the backends commit
// without fsync to keep them fast; sqlite_schema_test.cpp checks the durable default.)
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
template <class Backend>
std::vector<int64_t> drain(const Backend& db, const std::string& worker, const std::atomic<bool>& producers_done,
                           std::latch& start, int batch = 1) {
  auto q = db.open();
  start.arrive_and_wait();
  std::vector<int64_t> got;
  JobResult r{.text = worker, .finish_reason = "stop"};
  while (true) {
    // Read the flag before claiming: an empty claim after the producers were
    // done means nothing is left.
    const bool last_round = producers_done.load();
    std::vector<Job> jobs;
    if (batch == 1) {
      if (std::optional<Job> j = q->claim(worker, kLeaseMs)) jobs.push_back(std::move(*j));
    } else {
      jobs = q->claim_batch(worker, kLeaseMs, batch, "");
    }
    for (const Job& j : jobs) {
      got.push_back(j.id);
      if (!q->complete(j.lease(), r)) got.push_back(-j.id);  // a broken fence shows up as a negative id
    }
    if (!jobs.empty()) {
      continue;
    } else if (last_round) {
      break;
    } else {
      std::this_thread::yield();
    }
  }
  return got;
}

}  // namespace

QUEUE_TEST("two workers with their own connections never claim the same job") {
  QUEUE_BACKEND(db);
  constexpr int kJobs = 200;
  {
    auto q = db.open();
    for (int i = 0; i < kJobs; ++i) q->submit(spec(i));
  }
  std::atomic<bool> done{true};
  std::latch start(2);
  std::vector<int64_t> a, b;
  std::thread ta([&] { a = drain(db, "worker-a", done, start); });
  std::thread tb([&] { b = drain(db, "worker-b", done, start); });
  ta.join();
  tb.join();

  std::vector<int64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::set<int64_t> unique(all.begin(), all.end());
  CHECK(all.size() == kJobs);
  CHECK(unique.size() == kJobs);
  MESSAGE("worker-a claimed " << a.size() << ", worker-b " << b.size());

  auto q = db.open();
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

QUEUE_TEST("submitters and workers running at the same time lose nothing") {
  QUEUE_BACKEND(db);
  db.open();  // create the schema before the race
  constexpr int kPerProducer = 100;
  std::atomic<bool> producers_done{false};
  std::vector<int64_t> submitted_a, submitted_b, got_a, got_b;

  std::latch start(4);
  auto produce = [&](std::vector<int64_t>& out, int base) {
    auto q = db.open();
    start.arrive_and_wait();
    for (int i = 0; i < kPerProducer; ++i) out.push_back(q->submit(spec(base + i)).id);
  };
  std::thread wa([&] { got_a = drain(db, "a", producers_done, start); });
  std::thread wb([&] { got_b = drain(db, "b", producers_done, start, 4); });  // b claims batches
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

QUEUE_TEST("connections opening a new database at once apply the migrations exactly once") {
  QUEUE_BACKEND(db);
  std::atomic<int> applied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { applied += db.migrate(); });
  }
  for (auto& t : threads) t.join();
  CHECK(applied.load() == Backend::latest_schema_version());
  CHECK(db.schema_version() == Backend::latest_schema_version());
}

QUEUE_TEST("four processes submitting and claiming at once: none lost, none duplicated") {
  // The mission's queue figure, scaled down to stay fast: separate processes,
  // as the CLI and daemons are, each submitting and then claiming.
  QUEUE_BACKEND(db);
  db.open();
  constexpr int kProcesses = 4, kPerProcess = 150;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        auto q = db.open();
        for (int i = 0; i < kPerProcess; ++i) q->submit(spec(p * 1000 + i));
        JobResult r{.finish_reason = "stop"};
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
  CHECK(db.scalar("SELECT count(*) FROM jobs") == kProcesses * kPerProcess);
  CHECK(db.scalar("SELECT count(*) FROM jobs WHERE state = 'done' AND attempts = 1") == kProcesses * kPerProcess);
  CHECK(db.scalar("SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE r.text = j.worker") ==
        kProcesses * kPerProcess);
}
