// The worker under the failures it must survive, on real database files and
// generated models: checkpoints and exact resumption, leases renewed by the
// heartbeat and lost to a rival, a stalled generation giving its job up,
// transient and permanent failures, a locked database, cancellation timing.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "daemon/lib/heartbeat.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "daemon/lib/worker.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_queue.h"
#include "jobs/time_format.h"
#include "tests/unit/daemon/generated_models.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;
using namespace std::chrono_literals;
using daemon::JobOutcome;
using jobs::JobState;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Fixture {
  test::TempDir dir;
  std::string db_path = dir.file("q.db");
  std::unique_ptr<jobs::Queue> queue = jobs::open_sqlite_queue(db_path, test::kFastCommits);
  std::unique_ptr<jobs::Queue> other = jobs::open_sqlite_queue(db_path, test::kFastCommits);  // another process
  std::atomic<bool> stop{false};
  daemon::WorkerOptions options;

  explicit Fixture(const std::string& model) {
    spdlog::set_level(spdlog::level::off);  // failures are logged on purpose here
    options.worker_id = "worker-1";
    options.models = {{"m", model}};
    options.engine.threads = 1;
    options.engine.context = 1024;
    options.poll_interval_ms = 10;
    options.retry_backoff = {0, 0};
    options.database_backoff = {20, 100};
  }

  int64_t submit(int max_tokens, float temperature = 0.0f, uint64_t seed = 0) {
    jobs::JobSpec s = test::generation_spec("m", "The nightly report says", max_tokens);
    s.sampling.temperature = temperature;
    s.sampling.seed = seed;
    return queue->submit(s).id;
  }
  jobs::Job job(int64_t id) { return *queue->get(id); }
};

}  // namespace

TEST_CASE("checkpoints are written every N tokens, never once per token, and dropped when the job ends") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  f.options.checkpoint_tokens = 8;
  f.options.checkpoint_interval_ms = 0;
  const int64_t id = f.submit(40);
  std::set<size_t> sizes;
  int checked = 0;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated == 0) return;  // prefill
    const std::optional<jobs::Checkpoint> cp = f.other->checkpoint(id);
    const size_t saved = cp ? cp->tokens.size() : 0;
    CHECK(saved == static_cast<size_t>(p.generated - p.generated % 8));
    if (cp) CHECK(std::equal(cp->tokens.begin(), cp->tokens.end(), p.tokens->begin()));
    sizes.insert(saved);
    ++checked;
  });
  CHECK(worker.run_next() == JobOutcome::done);
  CHECK(checked == 40);
  CHECK(sizes == std::set<size_t>{0, 8, 16, 24, 32, 40});
  CHECK_FALSE(f.queue->checkpoint(id));
}

TEST_CASE("checkpoints are also written every S milliseconds while tokens come") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  f.options.checkpoint_tokens = 0;
  f.options.checkpoint_interval_ms = 50;
  const int64_t id = f.submit(30);
  size_t at_11 = 0;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated == 10) std::this_thread::sleep_for(60ms);  // a slow token
    if (p.generated == 11) {
      const std::optional<jobs::Checkpoint> cp = f.other->checkpoint(id);
      at_11 = cp ? cp->tokens.size() : 0;
    }
  });
  CHECK(worker.run_next() == JobOutcome::done);
  CHECK(at_11 == 11);
}

TEST_CASE("a job resumed from its checkpoint ends with the same text as an uninterrupted run") {
  const auto model = test::small_model();
  if (!model) return;
  for (const float temperature : {0.0f, 0.9f}) {
    CAPTURE(temperature);
    Fixture f(*model);
    f.options.checkpoint_tokens = 5;
    const int64_t interrupted = f.submit(60, temperature, 42);
    const int64_t reference = f.submit(60, temperature, 42);
    {
      daemon::Worker first(*f.queue, f.options, f.stop);
      first.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
        if (p.generated == 23) f.stop = true;
      });
      CHECK(first.run_next() == JobOutcome::released);
    }
    REQUIRE(f.queue->checkpoint(interrupted));
    CHECK(f.queue->checkpoint(interrupted)->tokens.size() == 24);
    f.stop = false;
    f.options.worker_id = "worker-2";
    daemon::Worker second(*f.queue, f.options, f.stop);
    CHECK(second.run(/*drain=*/true) == 2);
    const jobs::Job a = f.job(interrupted), b = f.job(reference);
    REQUIRE(a.result);
    REQUIRE(b.result);
    CHECK(a.result->completion_tokens == 60);
    CHECK(a.result->text == b.result->text);
    CHECK(f.queue->attempts(interrupted).back().resumed_tokens == 24);
    CHECK(f.queue->attempts(reference).back().resumed_tokens == 0);
  }
}

TEST_CASE("a worker whose lease was taken over stops and writes nothing") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  f.options.lease_ms = 1;  // no heartbeat thread here: the lease lapses at once
  f.options.checkpoint_tokens = 1;
  // The worker takes lapsed leases back every cancel_poll_ms, its own too: on a slow engine (TSan, a loaded
  // machine) it would before token 5, and the rival is who must.
  f.options.cancel_poll_ms = 600'000;
  const int64_t id = f.submit(200);
  std::optional<jobs::Job> rival;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated == 5 && !rival) {
      std::this_thread::sleep_for(5ms);
      CHECK(f.other->recover_expired({0, 0}).requeued == 1);
      rival = f.other->claim("rival", 60'000);
    }
  });
  CHECK(worker.run_next() == JobOutcome::lease_lost);
  REQUIRE(rival);
  const jobs::Job j = f.job(id);
  CHECK(j.state == JobState::running);
  CHECK(j.worker == "rival");
  CHECK_FALSE(j.result);
  CHECK(f.other->checkpoint(id)->tokens.size() == 5);  // the rival resumes from what worker-1 saved
  CHECK(f.queue->attempts(id)[0].outcome == "lease_expired");
}

TEST_CASE("the heartbeat renews the lease while the job runs; a stalled generation gives its job up") {
  const auto model = test::slow_model();
  if (!model) return;
  Fixture f(*model);
  f.options.lease_ms = 240;
  f.options.checkpoint_tokens = 0;
  f.options.checkpoint_interval_ms = 0;  // only the heartbeat extends the lease
  f.options.engine.context = 4000;       // room for 3000 tokens: the job outlasts several lease periods
  const daemon::ServiceNotifier notifier;
  daemon::RunStatus status;
  daemon::Heartbeat heartbeat([&] { return jobs::open_sqlite_queue(f.db_path, test::kFastCommits); }, status, notifier,
                              // No stall until the test makes one, however slow a token (TSan: over 150 ms).
                              {.lease_ms = 240,
                               .stall_timeout_ms = 600'000,
                               .status_interval_ms = 1000,
                               .progress_interval_ms = 5000,
                               .tick_ms = 10,
                               .worker_id = ""});

  SUBCASE("renewed") {
    const int64_t id = f.submit(3000);
    const auto t0 = Clock::now();
    int64_t rival_recoveries = 0, first_expiry = 0, last_expiry = 0;
    daemon::Worker worker(*f.queue, f.options, f.stop, &status);
    worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
      if (p.generated == 0) return;
      rival_recoveries += f.other->recover_expired({0, 0}).total();
      last_expiry = f.other->get(id)->lease_expires_ms;
      if (first_expiry == 0) first_expiry = last_expiry;
      // Stop on state, not on time (a fast engine finishes the job in half a
      // second): once the heartbeat has pushed the lease past a whole lease
      // period beyond where it started, three renewals in.
      if (heartbeat.renewals() >= 3 && last_expiry > first_expiry + 240) f.stop = true;
    });
    CHECK(worker.run_next() == JobOutcome::released);
    MESSAGE("the lease was renewed " << heartbeat.renewals() << " times in " << ms_since(t0) << " ms");
    CHECK(rival_recoveries == 0);
    CHECK(heartbeat.renewals() >= 2);
    CHECK(last_expiry > first_expiry + 240);
    CHECK(f.job(id).state == JobState::queued);
  }
  SUBCASE("stalled") {
    const int64_t id = f.submit(3000);
    std::optional<jobs::Job> rival;
    daemon::Worker worker(*f.queue, f.options, f.stop, &status);
    worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
      if (p.generated != 5) return;
      // The engine hangs for a while: the heartbeat must stop renewing, the lease lapses.
      heartbeat.set_timing(240, 150);
      const auto until = Clock::now() + 20s;
      while (!rival && Clock::now() < until) {
        std::this_thread::sleep_for(20ms);
        if (f.other->recover_expired({0, 0}).total() == 1) rival = f.other->claim("rival", 60'000);
      }
    });
    CHECK(worker.run_next() == JobOutcome::lease_lost);
    REQUIRE(rival);
    CHECK(rival->id == id);
    CHECK(f.job(id).worker == "rival");
    CHECK(f.queue->attempts(id)[0].outcome == "lease_expired");
  }
}

TEST_CASE("a model file that is missing (a path typo, a disk mounted late) leaves its job queued, then it runs") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  const std::string late = f.dir.file("late.gguf");
  f.options.models["m"] = late;
  const int64_t id = f.submit(5);
  daemon::Worker worker(*f.queue, f.options, f.stop);

  CHECK(worker.run_next() == JobOutcome::unservable);  // the daemon's config or machine, not the job's
  jobs::Job j = f.job(id);
  CHECK(j.state == JobState::queued);
  CHECK(j.attempts == 0);
  REQUIRE(f.queue->attempts(id).size() == 1);
  CHECK_MESSAGE(f.queue->attempts(id)[0].error.find("late.gguf does not exist") != std::string::npos,
                f.queue->attempts(id)[0].error);
  CHECK(worker.run(/*drain=*/true) == 0);  // a drain leaves it held ...
  CHECK(worker.left_held());
  CHECK(f.job(id).state == JobState::queued);

  std::filesystem::copy_file(*model, late);  // ... until the disk is mounted, and the daemon reloaded
  daemon::Worker next(*f.queue, f.options, f.stop);
  CHECK(next.run(/*drain=*/true) == 1);
  CHECK_FALSE(next.left_held());
  j = f.job(id);
  CHECK(j.state == JobState::done);
  CHECK(j.attempts == 1);
  CHECK(f.queue->attempts(id).back().outcome == "done");
}

TEST_CASE(
    "a model this user may not read, or behind a directory it cannot enter, leaves its jobs queued with how to fix it") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  const std::string locked = f.dir.file("locked.gguf");
  std::filesystem::copy_file(*model, locked);
  chmod(locked.c_str(), 0);
  const std::string closed_dir = f.dir.file("closed");
  std::filesystem::create_directory(closed_dir);
  const std::string hidden = closed_dir + "/hidden.gguf";
  std::filesystem::copy_file(*model, hidden);
  chmod(closed_dir.c_str(), 0700);
  f.options.models["locked"] = locked;
  f.options.models["hidden"] = hidden;
  auto submit_for = [&](const char* name) {
    jobs::JobSpec s;
    s.model = name;
    s.prompt = "x";
    return f.queue->submit(s).id;
  };
  const int64_t id = submit_for("locked");
  const int64_t behind = submit_for("hidden");
  const int64_t good = f.submit(3);

  if (geteuid() == 0) {
    // Root reads anything: run the worker as `nobody` in a child process.
    chmod(f.dir.path().c_str(), 0777);
    for (const char* suffix : {"", "-wal", "-shm"}) chmod((f.db_path + suffix).c_str(), 0666);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 10;
      if (setgid(65534) == 0 && setuid(65534) == 0) {
        try {
          auto q = jobs::open_sqlite_queue(f.db_path, test::kFastCommits);
          daemon::Worker worker(*q, f.options, f.stop);
          code = worker.run(/*drain=*/true);
        } catch (...) {
          code = 11;
        }
      }
      _exit(code);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // the good job; the two others were handed back
  } else {
    daemon::Worker worker(*f.queue, f.options, f.stop);
    CHECK(worker.run(/*drain=*/true) == 1);
  }
  // Not the jobs' fault: queued, no attempt counted, the reason in their history.
  for (int64_t stuck : {id, behind}) {
    const jobs::Job j = f.job(stuck);
    CHECK(j.state == JobState::queued);
    CHECK(j.attempts == 0);
  }
  const jobs::AttemptRecord read = f.queue->attempts(id).front();
  CHECK(read.error_kind == "daemon_config");
  CHECK_MESSAGE(read.error.find("cannot read " + locked + ": Permission denied") != std::string::npos, read.error);
  CHECK_MESSAGE(read.error.find("fix the permissions and reload the daemon") != std::string::npos, read.error);
  const jobs::AttemptRecord enter = f.queue->attempts(behind).front();
  CHECK_MESSAGE(
      enter.error.find("cannot enter directory " + closed_dir + " on the way to " + hidden) != std::string::npos,
      enter.error);
  CHECK(enter.error.find("does not exist") == std::string::npos);
  CHECK(f.job(good).state == JobState::done);
}

TEST_CASE("a database locked by another writer: the worker waits, carries on, and stores the result once") {
  const auto model = test::small_model();
  if (!model) return;
  test::TempDir dir;
  const std::string path = dir.file("q.db");
  auto queue = jobs::open_sqlite_queue(path, {.busy_timeout_ms = 50, .synchronous = jobs::Synchronous::normal});
  jobs::JobSpec s;
  s.model = "m";
  s.prompt = "Locked out";
  s.sampling.max_tokens = 8;
  s.sampling.ignore_eos = true;
  const int64_t first = queue->submit(s).id;
  const int64_t second = queue->submit(s).id;
  std::atomic<bool> stop{false};
  daemon::WorkerOptions options;
  options.worker_id = "w";
  options.models = {{"m", *model}};
  options.engine.threads = 1;
  options.database_backoff = {20, 100};
  spdlog::set_level(spdlog::level::off);
  daemon::Worker worker(*queue, options, stop);

  // Locked while the worker claims: it backs off and tries later.
  {
    jobs::sqlite::Db holder(path);
    holder.exec("BEGIN IMMEDIATE");
    CHECK(worker.run_next() == JobOutcome::database_unavailable);
    holder.exec("COMMIT");
  }
  CHECK(queue->get(first)->state == JobState::queued);

  // Locked when the job finishes: the result waits for the lock instead of being lost.
  std::thread releaser;
  Clock::time_point locked_at;
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated != 8 || releaser.joinable()) return;
    auto holder = std::make_shared<jobs::sqlite::Db>(path);
    holder->exec("BEGIN IMMEDIATE");
    locked_at = Clock::now();
    releaser = std::thread([holder] {
      std::this_thread::sleep_for(400ms);
      holder->exec("COMMIT");
    });
  });
  CHECK(worker.run_next() == JobOutcome::done);
  const double waited = ms_since(locked_at);
  releaser.join();
  MESSAGE("the result was stored " << waited << " ms after the lock was taken (held 400 ms)");
  CHECK(waited >= 390);
  const jobs::Job j = *queue->get(first);
  CHECK(j.state == JobState::done);
  CHECK(j.attempts == 1);
  CHECK(queue->attempts(first).size() == 1);
  CHECK(j.result->completion_tokens == 8);

  worker.set_progress_observer({});
  CHECK(worker.run_next() == JobOutcome::done);  // and the next job is unaffected
  CHECK(queue->get(second)->state == JobState::done);
}

TEST_CASE("nightshift cancel stops a running job within a second") {
  const auto model = test::slow_model();
  if (!model) return;
  Fixture f(*model);  // cancel_poll_ms stays at its default, 200 ms
  const int64_t id = f.submit(3000);
  auto q = jobs::open_sqlite_queue(f.db_path, test::kFastCommits);
  std::optional<Clock::time_point> cancelled_at;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  // The cancel goes in on state, at the job's first generated token (a
  // canceller that slept "well into the decode" found the job done once the
  // engine got fast: 3000 tokens of this model take about half a second).
  // From then on each step takes at least 1 ms more, so the job cannot end
  // (3 s to go) before the 200 ms cancel poll has looked.
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated == 0) return;
    if (!cancelled_at) {
      CHECK(q->cancel(id));
      cancelled_at = Clock::now();
    }
    std::this_thread::sleep_for(1ms);
  });
  CHECK(worker.run_next() == JobOutcome::cancelled);
  REQUIRE(cancelled_at);
  const double took_ms = ms_since(*cancelled_at);
  MESSAGE("cancel -> state cancelled in " << took_ms << " ms");
  CHECK(took_ms < 1000);
  const jobs::Job j = f.job(id);
  CHECK(j.state == JobState::cancelled);
  CHECK(j.result->completion_tokens > 0);
  CHECK(j.result->completion_tokens < 3000);
}

TEST_CASE("a damaged checkpoint row costs the saved work, not the daemon") {
  const auto model = test::small_model();
  if (!model) return;
  Fixture f(*model);
  const int64_t id = f.submit(6);
  const int64_t reference = f.submit(6);
  {
    jobs::sqlite::Db raw(f.db_path);  // a hand edit gone wrong
    raw.exec("INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms, saved_at) VALUES (" +
             std::to_string(id) + ", 1, 3, '[1, 2, \"x\"]', 0, 't')");
  }
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run(/*drain=*/true) == 2);
  REQUIRE(f.job(id).result);
  CHECK(f.job(id).state == JobState::done);
  CHECK(f.job(id).result->text == f.job(reference).result->text);  // started over
}
