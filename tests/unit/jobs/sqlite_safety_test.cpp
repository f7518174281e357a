// Database safety on real files: a database made by the previous schema is
// upgraded without loss; the start-up integrity check catches a damaged
// file; a database locked by another writer and a full filesystem give
// transient errors that name the problem, and leave the file intact.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue.h"
#include "jobs/time_format.h"
#include "tests/unit/jobs/database_error.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns::jobs;
using ns::test::database_error_from;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

JobSpec spec(const std::string& prompt) { return ns::test::job_spec("tiny", prompt); }

// A small tmpfs mounted for one test (needs root; skips otherwise).
class SmallFilesystem {
 public:
  SmallFilesystem(const std::string& dir, const char* size) : dir_(dir) {
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallFilesystem() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// Writes zeros to `path` until the filesystem refuses; returns the bytes written.
size_t fill_until_full(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string block(4096, '\0');
  size_t written = 0;
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) written += block.size();
  std::fclose(f);
  return written;
}

}  // namespace

TEST_CASE("a database made by schema 001 is upgraded without losing a row or an id") {
  ns::test::TempDir dir;
  const std::string path = dir.file("old.db");
  {
    // Exactly what the previous release created and wrote.
    sqlite::Db db(path);
    db.exec(sqlite::migrations()[0].sql);
    db.exec("PRAGMA user_version = 1");
    const std::string cols =
        "INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, "
        "repeat_last_n, seed, stop, priority, idempotency_key, state, created_ms, created_at, started_ms, "
        "started_at, finished_ms, finished_at, worker, attempts, error_kind, error) VALUES ";
    db.exec(cols +
            "('tiny', 'done job', 9, 0.5, 40, 0.9, 0.05, 1.1, 64, -5, '[\"\\n\"]', 2, 'key-1', 'done', "
            "1000, 'c1', 1100, 's1', 1200, 'f1', 'host:1', 1, NULL, NULL)");
    db.exec(cols +
            "('tiny', 'failed job', 9, 0.5, 40, 0.9, 0.05, 1, 64, 1, '[]', 0, NULL, 'failed', "
            "2000, 'c2', 2100, 's2', 2200, 'f2', 'host:1', 1, 'bad_model', 'truncated')");
    db.exec(cols +
            "('tiny', 'running job', 9, 0.5, 40, 0.9, 0.05, 1, 64, 1, '[]', 0, NULL, 'running', "
            "3000, 'c3', 3100, 's3', NULL, NULL, 'host:2', 2, NULL, NULL)");
    db.exec(cols +
            "('tiny', 'queued job', 9, 0.5, 40, 0.9, 0.05, 1, 64, 1, '[]', 7, NULL, 'queued', "
            "4000, 'c4', NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL)");
    db.exec(cols +
            "('tiny', 'deleted job', 9, 0.5, 40, 0.9, 0.05, 1, 64, 1, '[]', 0, NULL, 'queued', "
            "5000, 'c5', NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL)");
    db.exec("INSERT INTO results VALUES (1, 'the text', 'length', 4, 9, 100, 5, 6, 7, 8, 9, 1234, 5678)");
    db.exec("DELETE FROM jobs WHERE id = 5");  // the highest id is gone; it must not be reused
  }

  auto q = open_sqlite_queue(path);
  {
    sqlite::Db db(path);
    CHECK(db.scalar_int("PRAGMA user_version") == sqlite::latest_schema_version());
    CHECK(db.scalar_int("SELECT count(*) FROM jobs") == 4);
    CHECK(db.integrity_problems(IntegrityCheck::full).empty());
    CHECK(db.scalar_int("SELECT count(*) FROM pragma_foreign_key_check") == 0);
  }
  const Job done = *q->get(1);
  CHECK(done.state == JobState::done);
  CHECK(done.spec.prompt == "done job");
  CHECK(done.spec.sampling.seed == static_cast<uint64_t>(-5));
  CHECK(done.spec.sampling.stop == std::vector<std::string>{"\n"});
  CHECK(done.spec.sampling.repeat_penalty == doctest::Approx(1.1));
  CHECK(done.spec.idempotency_key == "key-1");
  CHECK(done.spec.priority == 2);
  CHECK(done.spec.max_attempts == kDefaultMaxAttempts);
  CHECK(done.created_ms == 1000);
  CHECK(done.finished_ms == 1200);
  CHECK(done.worker == "host:1");
  CHECK(done.attempt == 1);
  REQUIRE(done.result);  // results survive the rebuild of `jobs` (no cascade)
  CHECK(done.result->text == "the text");
  CHECK(done.result->bytes_read == 5678);
  CHECK(q->attempts(1).size() == 1);
  CHECK(q->attempts(1)[0].outcome == "done");

  const Job failed = *q->get(2);
  CHECK(failed.state == JobState::failed);
  CHECK(failed.error == "truncated");
  CHECK(q->attempts(2)[0].outcome == "failed");

  // A job left running by the old daemon has no lease: the first recovery takes it back.
  const Job running = *q->get(3);
  CHECK(running.state == JobState::running);
  CHECK(running.attempt == 2);
  const Recovery r = q->recover_expired(Backoff{0, 0});
  CHECK(r.requeued == 1);
  CHECK(q->attempts(3).back().outcome == "lease_expired");

  CHECK(q->submit(spec("new job")).id == 6);  // 5 stays retired
  std::optional<Job> next = q->claim("host:3", 60'000);
  REQUIRE(next);
  CHECK(next->id == 4);  // priority 7 still first
}

TEST_CASE("the integrity check on open refuses a damaged file and says how to recover") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  {
    auto q = open_sqlite_queue(path);
    std::vector<JobSpec> specs;
    for (int i = 0; i < 200; ++i) specs.push_back(spec(std::string(900, static_cast<char>('a' + i % 26))));
    q->submit_many(specs);
  }
  {
    sqlite::Db db(path);  // fold the WAL into the file so the damage below hits real pages
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  CHECK(open_sqlite_queue(path, {.integrity_check = IntegrityCheck::full}) != nullptr);  // healthy
  {
    // Scribble over a page in the middle of the file (table data, not the schema).
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0, std::ios::end);
    const std::streamoff size = f.tellp();
    REQUIRE(size > 40 * 4096);
    f.seekp((size / 4096 / 2) * 4096);
    const std::string junk(4096, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  for (IntegrityCheck mode : {IntegrityCheck::quick, IntegrityCheck::full}) {
    const DatabaseError e = database_error_from([&] { open_sqlite_queue(path, {.integrity_check = mode}); });
    const std::string msg = e.what();
    CHECK_FALSE(e.transient());
    CHECK_MESSAGE(contains(msg, path), msg);
    CHECK_MESSAGE(
        contains(msg, mode == IntegrityCheck::quick ? "failed PRAGMA quick_check" : "failed PRAGMA integrity_check"),
        msg);
    CHECK_MESSAGE(contains(msg, ".recover"), msg);
  }
}

TEST_CASE("a database locked by another writer: a transient error after the busy timeout, nothing half-done") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  auto q = open_sqlite_queue(path, {.busy_timeout_ms = 150});
  const int64_t first = q->submit(spec("before the lock")).id;

  sqlite::Db other_writer(path);
  other_writer.exec("BEGIN IMMEDIATE");  // e.g. a sqlite3 shell left inside a transaction
  const auto t0 = std::chrono::steady_clock::now();
  const DatabaseError e = database_error_from([&] { q->submit(spec("while locked")); });
  const double waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string msg = e.what();
  CHECK(e.transient());
  CHECK_MESSAGE(contains(msg, "database is locked"), msg);
  CHECK_MESSAGE(contains(msg, "busy timeout (150 ms)"), msg);
  CHECK(waited_ms >= 140);
  MESSAGE("submit gave up after " << waited_ms << " ms");
  CHECK_THROWS_AS(q->claim("w", 60'000), DatabaseError);
  CHECK(q->counts().queued == 1);  // reads still work under WAL
  other_writer.exec("COMMIT");

  CHECK(q->submit(spec("after the lock")).id == first + 1);  // nothing was half-written
  CHECK(q->counts().queued == 2);
}

TEST_CASE("a full filesystem: a transient error naming the disk, and an intact database once space is back") {
  if (geteuid() != 0) {
    MESSAGE("skipping: mounting a small tmpfs needs root");
    return;
  }
  ns::test::TempDir dir;
  const std::string mnt = dir.file("small");
  std::filesystem::create_directory(mnt);
  SmallFilesystem fs(mnt, "512k");
  if (!fs.mounted()) {
    MESSAGE("skipping: cannot mount a tmpfs here (" << fs.error() << ")");
    return;
  }
  const std::string path = mnt + "/q.db";
  auto q = open_sqlite_queue(path);
  const int64_t before = q->submit(spec("fits")).id;
  const std::string filler = mnt + "/filler";
  MESSAGE("filled the 512 KiB filesystem with " << fill_until_full(filler) << " bytes");

  // A job big enough to need new pages in the WAL.
  const DatabaseError e = database_error_from([&] { q->submit(spec(std::string(64 * 1024, 'x'))); });
  const std::string msg = e.what();
  CHECK(e.transient());
  CHECK_MESSAGE(contains(msg, "database or disk is full"), msg);
  CHECK_MESSAGE(contains(msg, "free space on the filesystem holding the database"), msg);
  CHECK(q->get(before));  // still readable

  std::filesystem::remove(filler);
  const int64_t after = q->submit(spec(std::string(64 * 1024, 'y'))).id;
  CHECK(after == before + 1);
  sqlite::Db db(path);
  CHECK(db.integrity_problems(IntegrityCheck::full).empty());
  CHECK(db.scalar_int("SELECT count(*) FROM jobs") == 2);
}

// docs/fleet.md, finding 2: processes sharing a file stamp times with their
// own wall clocks. A lease this clock calls expired is taken over only once
// watched unrenewed for lease_watch_ms (steady clock); a renewal restarts the
// watch and is reported; a retry backoff further ahead than max_backoff_ms
// (plus kClockBackMs) is claimable at once, a nearer one is waited out.
// A job left running by a worker with no row (an older release's daemon, a
// row pruned) is taken over as soon as its lease has expired: no one renews it.
TEST_CASE("SQLite: an expired lease of an unregistered worker is taken at once, not watched") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  auto holder = open_sqlite_queue(path);
  auto rival = open_sqlite_queue(path, SqliteOptions{.lease_watch_ms = 600'000});
  holder->submit(spec("left running"));
  const std::optional<Job> j = holder->claim("gone", 1);
  REQUIRE(j);
  while (now_epoch_ms() <= j->lease_expires_ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(rival->recover_expired(Backoff{0, 0}).requeued == 1);
}

TEST_CASE("SQLite: distrusted leases are watched before a take-over; far-future backoffs are claimable") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  std::vector<std::string> told;
  SqliteOptions watching{.lease_watch_ms = 300, .max_backoff_ms = 600'000};
  watching.on_clock_disagreement = [&](const std::string& what) { told.push_back(what); };
  auto holder = open_sqlite_queue(path);
  auto rival = open_sqlite_queue(path, watching);
  const Backoff none{0, 0};

  // A registered, live holder (a worker with no row is gone, and taken from at once).
  REQUIRE(holder->register_worker(WorkerInfo{.id = "holder", .host = "h", .pid = 1}).empty());
  const int64_t id = holder->submit(spec("held")).id;
  const std::optional<Job> j = holder->claim("holder", 1);  // expires at once by every clock
  REQUIRE(j);
  while (now_epoch_ms() <= j->lease_expires_ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(rival->recover_expired(none).total() == 0);         // first seen: watched, not taken
  REQUIRE(holder->heartbeat(j->lease(), 1, std::nullopt));  // renewed (and expired again at once)
  const int64_t renewed = holder->get(id)->lease_expires_ms;
  while (now_epoch_ms() <= renewed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(rival->recover_expired(none).total() == 0);  // a new lease value: watched afresh
  REQUIRE(told.size() == 1);
  CHECK(told[0].find("job " + std::to_string(id) + ": the lease of worker holder looked expired") == 0);
  // Left unrenewed: taken once the watch has lasted lease_watch_ms.
  const auto t0 = std::chrono::steady_clock::now();
  int64_t taken = 0;
  while (taken == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    taken = rival->recover_expired(none).requeued;
    if (taken == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(taken == 1);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(250));
  CHECK(holder->get(id)->state == JobState::queued);

  // Backoffs: one an hour ahead (a clock running ahead stamped it), one 5 min ahead (within the cap).
  sqlite::Db db(path);
  const int64_t near = holder->submit(spec("near")).id, far = holder->submit(spec("far")).id;
  const int64_t now = now_epoch_ms();
  db.exec("UPDATE jobs SET not_before_ms = " + std::to_string(now + 300'000) +
          ", error_kind = 'io', error = 'x' WHERE id = " + std::to_string(near));
  db.exec("UPDATE jobs SET not_before_ms = " + std::to_string(now + 3'600'000) +
          ", error_kind = 'io', error = 'x' "
          "WHERE id IN (" +
          std::to_string(far) + ", " + std::to_string(id) + ")");
  std::vector<int64_t> claimed;
  while (std::optional<Job> c = rival->claim("rival", 60'000)) claimed.push_back(c->id);
  CHECK(claimed == std::vector<int64_t>{id, far});
  CHECK(rival->counts().retry_waiting == 1);  // the near one
}
