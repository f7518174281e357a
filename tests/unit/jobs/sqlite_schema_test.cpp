// Opening a database: migrations (numbered, idempotent, never downgrading),
// connection settings (WAL, foreign keys, busy timeout) and readable errors.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "common/error.h"
#include "jobs/queue.h"
#include "jobs/pg_migrations.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/jobs/database_error.h"
#include "tests/unit/jobs/temp_dir.h"
#include "tests/unit/error_message.h"

using namespace ns::jobs;

TEST_CASE("each backend's embedded migrations are numbered 1..N and not empty") {
  const auto check = [](std::span<const Migration> all, int latest) {
    REQUIRE_FALSE(all.empty());
    for (size_t i = 0; i < all.size(); ++i) {
      CHECK(all[i].version == static_cast<int>(i + 1));
      CAPTURE(all[i].file_name);
      // Each changes the schema: creates something or alters a table.
      CHECK((all[i].sql.find("CREATE") != std::string_view::npos ||
             all[i].sql.find("ALTER TABLE") != std::string_view::npos));
    }
    CHECK(std::string(all[0].file_name) == "001_init.sql");
    CHECK(latest == all.back().version);
  };
  check(sqlite::migrations(), sqlite::latest_schema_version());
  check(pg::migrations(), pg::latest_schema_version());
}

TEST_CASE("migrations run once; reopening keeps the data and applies nothing") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  {
    sqlite::Db db(path);
    CHECK(sqlite::migrate(db) == sqlite::latest_schema_version());
    CHECK(db.scalar_int("PRAGMA user_version") == sqlite::latest_schema_version());
  }
  int64_t id = 0;
  {
    auto q = open_sqlite_queue(path);
    JobSpec s;
    s.model = "m";
    s.prompt = "p";
    id = q->submit(s).id;
  }
  {
    auto q = open_sqlite_queue(path);  // second open: no migration error, data intact
    REQUIRE(q->get(id));
    CHECK(q->get(id)->spec.prompt == "p");
  }
  sqlite::Db db(path);
  CHECK(sqlite::migrate(db) == 0);
  CHECK(db.scalar_int("SELECT count(*) FROM sqlite_master WHERE name IN ('jobs', 'results', 'job_summary', "
                      "'attempts', 'checkpoints')") == 5);
}

TEST_CASE("connections use WAL, foreign keys, a busy timeout and durable commits by default") {
  ns::test::TempDir dir;
  {
    sqlite::Db db(dir.file("q.db"));
    sqlite::Stmt mode(db, "PRAGMA journal_mode");
    REQUIRE(mode.step());
    CHECK(mode.text(0) == "wal");
    CHECK(db.scalar_int("PRAGMA foreign_keys") == 1);
    CHECK(db.scalar_int("PRAGMA busy_timeout") == 5000);
    CHECK(db.scalar_int("PRAGMA synchronous") == 2);  // FULL: a submitted job survives a power cut
  }
  sqlite::Db db(dir.file("q.db"), {.busy_timeout_ms = 250, .synchronous = Synchronous::normal});
  CHECK(db.scalar_int("PRAGMA busy_timeout") == 250);
  CHECK(db.scalar_int("PRAGMA synchronous") == 1);  // NORMAL
}

TEST_CASE("a database from a newer nightshift is refused, not modified") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  const int future = sqlite::latest_schema_version() + 1;
  {
    sqlite::Db db(path);
    sqlite::migrate(db);
    db.exec("PRAGMA user_version = " + std::to_string(future));
  }
  const DatabaseError e = ns::test::database_error_from([&] { open_sqlite_queue(path); });
  const std::string msg = e.what();
  CHECK_MESSAGE(ns::test::contains(msg, path), msg);
  CHECK_MESSAGE(ns::test::contains(msg, "upgrade nightshift"), msg);
  CHECK_FALSE(e.transient());
  sqlite::Db db(path);
  CHECK(db.scalar_int("PRAGMA user_version") == future);
}

TEST_CASE("errors name the file, SQLite's message and the SQL") {
  ns::test::TempDir dir;
  SUBCASE("not a database") {
    const std::string path = dir.file("notes.txt");
    std::ofstream(path) << "these are not the pages you are looking for, " << std::string(4096, 'x');
    const std::string msg = ns::test::expect_error(
        ns::ErrorKind::database, [&] { open_sqlite_queue(path); }, "opened a text file as a database");
    CHECK_MESSAGE(ns::test::contains(msg, path), msg);
    CHECK_MESSAGE(ns::test::contains(msg, "not a database"), msg);
  }
  SUBCASE("missing directory") {
    const std::string path = dir.file("no/such/dir/q.db");
    try {
      open_sqlite_queue(path);
      FAIL("opened a database in a missing directory");
    } catch (const ns::Error& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find(path) != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("directory exists") != std::string::npos, msg);
    }
  }
  SUBCASE("bad SQL") {
    sqlite::Db db(dir.file("q.db"));
    try {
      db.exec("SELECT * FROM no_such_table");
      FAIL("ran SQL against a missing table");
    } catch (const ns::Error& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("no such table: no_such_table") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("SELECT * FROM no_such_table") != std::string::npos, msg);
    }
  }
}

TEST_CASE("the schema's CHECK constraints reject impossible rows") {
  ns::test::TempDir dir;
  const std::string path = dir.file("q.db");
  open_sqlite_queue(path);
  sqlite::Db db(path);
  const std::string cols =
      "INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, "
      "repeat_last_n, seed, stop, state, created_ms, created_at) VALUES ";
  db.exec(cols + "('m', 'p', 1, 1, 1, 1, 0, 1, 1, 0, '[\"x\"]', 'queued', 1, 't')");  // the control row
  CHECK_THROWS_AS(db.exec(cols + "('m', 'p', 1, 1, 1, 1, 0, 1, 1, 0, '[]', 'finished', 1, 't')"), ns::Error);
  CHECK_THROWS_AS(db.exec(cols + "('m', 'p', 1, 1, 1, 1, 0, 1, 1, 0, 'not json', 'queued', 1, 't')"), ns::Error);
  CHECK_THROWS_AS(db.exec(cols + "('m', 'p', 1, 1, 1, 1, 0, 1, 1, 0, '{}', 'queued', 1, 't')"), ns::Error);
  CHECK_THROWS_AS(db.exec(cols + "('', 'p', 1, 1, 1, 1, 0, 1, 1, 0, '[]', 'queued', 1, 't')"), ns::Error);
  db.exec(cols + "('m', 'p', 1, 1, 1, 1, 0, 1, 1, 0, '[]', 'dead', 1, 't')");  // 002 added `dead`
  CHECK_THROWS_AS(db.exec("UPDATE jobs SET max_attempts = 0 WHERE id = 1"), ns::Error);
  CHECK_THROWS_AS(db.exec("INSERT INTO checkpoints VALUES (1, 1, 2, 'not json', 0, 't')"), ns::Error);
  CHECK_THROWS_AS(db.exec("INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, outcome) "
                          "VALUES (1, 1, 'w', 0, 't', 'exploded')"),
                  ns::Error);
  CHECK_THROWS_AS(db.exec("INSERT INTO checkpoints VALUES (999, 1, 0, '[]', 0, 't')"), ns::Error);  // no job 999
  // A result for a job that does not exist violates the foreign key.
  CHECK_THROWS_AS(db.exec("INSERT INTO results VALUES (999, 't', 'stop', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)"), ns::Error);
  CHECK(db.scalar_int("SELECT count(*) FROM jobs") == 2);
}
