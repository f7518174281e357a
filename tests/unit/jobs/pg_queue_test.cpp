// What only the PostgreSQL backend has to get right, on a real server
// (tests/unit/jobs/backends.h): its migrations and schema version table,
// reconnecting after a lost connection, which errors are transient, text
// PostgreSQL cannot store, and passwords kept out of messages.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "common/redact.h"
#include "common/error.h"
#include "jobs/pg_conn.h"
#include "jobs/pg_migrations.h"
#include "jobs/pg_queue.h"
#include "jobs/queue.h"
#include "tests/unit/jobs/backends.h"
#include "tests/unit/jobs/database_error.h"

using namespace ns::jobs;
using ns::test::database_error_from;

namespace {

JobSpec spec(const std::string& prompt) { return ns::test::job_spec("tiny", prompt); }

#define PG_BACKEND(db)                                      \
  ns::test::PgBackend db;                                   \
  if (!db.available()) {                                    \
    MESSAGE("skipped on PostgreSQL: " << db.skip_reason()); \
    return;                                                 \
  }

}  // namespace

TEST_CASE("PostgreSQL: migrations are recorded once; a newer schema is refused, not touched") {
  PG_BACKEND(db);
  CHECK(db.migrate() == pg::latest_schema_version());
  CHECK(db.migrate() == 0);
  CHECK(db.schema_version() == pg::latest_schema_version());
  CHECK(db.scalar("SELECT count(*) FROM nightshift_schema_version") == pg::latest_schema_version());
  CHECK(db.scalar("SELECT count(*) FROM information_schema.views WHERE table_name IN ('job_summary', "
                  "'batch_summary')") == 2);
  const int64_t id = db.open()->submit(spec("kept")).id;

  {
    pg::Conn conn(db.location());
    conn.exec("INSERT INTO nightshift_schema_version (version, file_name) VALUES (999, '999_future.sql')");
  }
  const DatabaseError e = database_error_from([&] { db.open(); });
  CHECK_FALSE(e.transient());
  CHECK_MESSAGE(std::string(e.what()).find("has schema version 999 but this nightshift knows versions up to") !=
                    std::string::npos,
                e.what());
  CHECK(db.scalar("SELECT count(*) FROM jobs WHERE id = " + std::to_string(id)) == 1);
}

TEST_CASE("PostgreSQL: a lost connection is made again by the next call") {
  PG_BACKEND(db);
  auto q = db.open();
  const int64_t first = q->submit(spec("before")).id;
  auto kill_other_connections = [&] {
    pg::Conn admin(db.location());
    return admin
        .exec(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        .int64(0, 0);
  };
  CHECK(kill_other_connections() == 1);
  // A read finds the connection gone, reconnects and runs again.
  CHECK(q->get(first)->spec.prompt == "before");
  CHECK(kill_other_connections() == 1);
  // So does a write (its BEGIN is what finds the connection gone).
  const int64_t second = q->submit(spec("after")).id;
  CHECK(second > first);
  CHECK(kill_other_connections() == 1);
  auto job = q->claim("w", 60'000);
  REQUIRE(job);
  CHECK(job->id == first);
  CHECK(q->counts().running == 1);
}

TEST_CASE("PostgreSQL: a connection lost inside a transaction is a transient error, never a silent half-commit") {
  PG_BACKEND(db);
  db.open();  // the schema
  pg::Conn conn(db.location());
  const int64_t pid = conn.exec("SELECT pg_backend_pid()").int64(0, 0);
  {
    pg::Transaction tx(conn);
    conn.exec(
        "INSERT INTO workers (id, host, pid, version, started_ms, heartbeat_ms) VALUES ('w1', 'h', 1, 'v', 1, 1)");
    pg::Conn admin(db.location());
    CHECK(admin.exec("SELECT pg_terminate_backend($1)", pg::Params().add(pid)).boolean(0, 0));
    // The next statement of the same transaction must not run on a new connection.
    const DatabaseError e = database_error_from([&] {
      conn.exec(
          "INSERT INTO workers (id, host, pid, version, started_ms, heartbeat_ms) VALUES "
          "('w2', 'h', 1, 'v', 1, 1)");
    });
    CHECK(e.transient());
    CHECK_THROWS_AS(tx.commit(), DatabaseError);  // nothing to commit on a new connection either
  }
  CHECK(conn.exec("SELECT count(*) FROM workers").int64(0, 0) == 0);  // reconnected; neither insert happened
  CHECK(conn.exec("SELECT pg_backend_pid()").int64(0, 0) != pid);

  // A transaction an error aborted does not "commit" either (PostgreSQL answers ROLLBACK).
  {
    pg::Transaction tx(conn);
    conn.exec(
        "INSERT INTO workers (id, host, pid, version, started_ms, heartbeat_ms) VALUES ('w3', 'h', 1, 'v', 1, 1)");
    CHECK_THROWS_AS(conn.exec("SELECT no_such_column FROM workers"), DatabaseError);
    CHECK_THROWS_WITH_AS(tx.commit(), doctest::Contains("the transaction was rolled back"), DatabaseError);
  }
  CHECK(conn.exec("SELECT count(*) FROM workers").int64(0, 0) == 0);
}

TEST_CASE("PostgreSQL: which failures are transient, and what the messages say") {
  PG_BACKEND(db);
  // The server cannot be reached (no socket there): wait and retry.
  const DatabaseError down =
      database_error_from([] { open_pg_queue("postgresql:///nightshift?host=/nonexistent-ns-dir&user=nightshift"); });
  CHECK(down.transient());
  CHECK(std::string(down.what()).find("cannot connect") != std::string::npos);
  // The database does not exist: a setting to fix, not a wait.
  const std::string missing = ns::test::PgTestServer::instance().url_for("no_such_db_ns");
  const DatabaseError wrong = database_error_from([&] { open_pg_queue(missing); });
  CHECK_FALSE(wrong.transient());
  CHECK_MESSAGE(std::string(wrong.what()).find("\"no_such_db_ns\" does not exist") != std::string::npos, wrong.what());
  CHECK_MESSAGE(std::string(wrong.what()).find("createdb") != std::string::npos, wrong.what());

  pg::Conn conn(db.location());
  auto raised = [&](const char* sqlstate) {
    return database_error_from([&] {
      conn.exec(std::string("DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '") + sqlstate + "'; END $$");
    });
  };
  CHECK(raised("40001").transient());  // serialization failure
  CHECK(raised("40P01").transient());  // deadlock
  CHECK(raised("55P03").transient());  // lock timeout
  CHECK(raised("53100").transient());  // disk full
  CHECK(raised("57P01").transient());  // server shutting down
  const DatabaseError constraint = raised("23505");
  CHECK_FALSE(constraint.transient());
  CHECK_MESSAGE(std::string(constraint.what()).find("(SQLSTATE 23505) in: DO $$") != std::string::npos,
                constraint.what());
  CHECK(std::string(constraint.what()).find("database postgresql://") == 0);
  CHECK(pg::transient_sqlstate("08006"));
  CHECK_FALSE(pg::transient_sqlstate("42P01"));
}

TEST_CASE("PostgreSQL: a real deadlock between two connections is reported as transient") {
  PG_BACKEND(db);
  auto q = db.open();
  const int64_t a = q->submit(spec("a")).id;
  const int64_t b = q->submit(spec("b")).id;
  pg::Conn one(db.location());
  pg::Conn two(db.location());
  one.exec("SET deadlock_timeout = '20ms'");
  two.exec("SET deadlock_timeout = '20ms'");
  const int64_t one_pid = one.exec("SELECT pg_backend_pid()").int64(0, 0);
  pg::Transaction t1(one);
  pg::Transaction t2(two);
  one.exec("UPDATE jobs SET priority = 1 WHERE id = " + std::to_string(a));
  two.exec("UPDATE jobs SET priority = 1 WHERE id = " + std::to_string(b));
  std::optional<DatabaseError> first, second;
  std::thread waiter([&] {
    try {
      one.exec("UPDATE jobs SET priority = 2 WHERE id = " + std::to_string(b));
    } catch (const DatabaseError& e) {
      first = e;
    }
  });
  // Wait (on state, not time) until `one` is blocked on `two`'s row lock.
  while (db.scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " + std::to_string(one_pid)) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    two.exec("UPDATE jobs SET priority = 2 WHERE id = " + std::to_string(a));
  } catch (const DatabaseError& e) {
    second = e;
  }
  if (!second) t2.commit();  // let the waiter go if `one` was chosen as the victim
  waiter.join();
  const DatabaseError& victim = first ? *first : *second;
  REQUIRE((first.has_value() != second.has_value()));
  CHECK(victim.transient());
  CHECK(std::string(victim.what()).find("40P01") != std::string::npos);
}

TEST_CASE("PostgreSQL: text it cannot hold: NUL in a prompt is refused, odd bytes in results are replaced") {
  PG_BACKEND(db);
  auto q = db.open();
  try {
    q->submit(spec(std::string("a\0b", 3)));
    FAIL("a prompt with a NUL byte was accepted");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::invalid_input);
    CHECK(std::string(e.what()).find("NUL byte (at byte 1)") != std::string::npos);
  }
  CHECK(q->counts().queued == 0);

  const int64_t id = q->submit(spec("p")).id;
  auto job = q->claim("w", 60'000);
  REQUIRE(job);
  JobResult r;
  static constexpr char kOdd[] = "ok \xE6\x97 cut, nul \0 end";  // a character cut in two, and a NUL
  r.text = std::string(kOdd, sizeof kOdd - 1);
  r.finish_reason = "length";
  CHECK(q->complete(job->lease(), r));
  // One U+FFFD per broken character, as jobs/valid_utf8.h (and Python) replace it.
  CHECK(q->get(id)->result->text == "ok \xEF\xBF\xBD cut, nul \xEF\xBF\xBD end");
}

TEST_CASE("PostgreSQL: times come from the server's clock") {
  PG_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  const int64_t server_now = db.scalar("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint");
  const Job job = *q->get(id);
  CHECK(job.created_ms <= server_now);
  CHECK(job.created_ms > server_now - 60'000);
  CHECK(db.scalar("SELECT count(*) FROM jobs WHERE created_at = to_timestamp(created_ms / 1000.0::float8)") == 1);
}

TEST_CASE("passwords never appear in messages") {
  CHECK(ns::redact_secrets("postgresql://night:s3cret@db.example/queue") == "postgresql://night:***@db.example/queue");
  CHECK(ns::redact_secrets("postgres://db/q?user=n&password=s3cret&sslmode=require") ==
        "postgres://db/q?user=n&password=***&sslmode=require");
  CHECK(ns::redact_secrets("postgresql://night@db/q") == "postgresql://night@db/q");
  const DatabaseError e = database_error_from(
      [] { open_pg_queue("postgresql://night:s3cret@/q?host=/nonexistent-ns-dir&connect_timeout=1"); });
  CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
}

TEST_CASE("libpq errors: a bad escape in the password is permanent and never echoed; messages are one line") {
  // libpq quotes the bad token, which here is the password itself.
  const DatabaseError bad = database_error_from(
      [] { open_pg_queue("postgresql://night:s3%zzcret@/q?host=/nonexistent-ns-dir&connect_timeout=1"); });
  CHECK_FALSE(bad.transient());  // waiting cannot fix a URL
  CHECK_MESSAGE(std::string(bad.what()).find("invalid percent-encoded token") != std::string::npos, bad.what());
  CHECK_MESSAGE(std::string(bad.what()).find("zzcret") == std::string::npos, bad.what());
  const DatabaseError keyword =
      database_error_from([] { open_pg_queue("postgresql:///q?host=/nonexistent-ns-dir&password=s3%zzcret"); });
  CHECK_MESSAGE(std::string(keyword.what()).find("zzcret") == std::string::npos, keyword.what());
  // "connection to server ... failed: ...\n\tIs the server running ...": one line.
  const DatabaseError down =
      database_error_from([] { open_pg_queue("postgresql://night@127.0.0.1:1/q?connect_timeout=1"); });
  CHECK(down.transient());
  CHECK_MESSAGE(std::string(down.what()).find('\n') == std::string::npos, down.what());
  CHECK_MESSAGE(std::string(down.what()).find("Connection refused; Is the server running") != std::string::npos,
                down.what());
}

TEST_CASE("libpq errors: SSL required by the URL but the server has none is permanent") {
  // A server without SSL answers an SSLRequest with 'N' (the protocol's "no"); this one does only that.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  REQUIRE(listen(fd, 4) == 0);
  std::thread server([fd] {
    const int c = accept(fd, nullptr, nullptr);
    if (c < 0) return;
    char request[8];
    if (recv(c, request, sizeof request, MSG_WAITALL) == 8) (void)!send(c, "N", 1, MSG_NOSIGNAL);
    close(c);
  });
  const std::string url =
      "postgresql://night@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/q?sslmode=require&connect_timeout=5";
  const DatabaseError e = database_error_from([&] { open_pg_queue(url); });
  server.join();
  close(fd);
  CHECK_FALSE(e.transient());
  CHECK_MESSAGE(std::string(e.what()).find("server does not support SSL, but SSL was required") != std::string::npos,
                e.what());
}

TEST_CASE("the views people read have the same columns on both backends; so do the tables") {
  ns::test::SqliteBackend sqlite;
  PG_BACKEND(pg);
  sqlite.open();
  pg.open();
  for (const char* table : {"job_summary", "batch_summary", "jobs", "results", "attempts", "checkpoints", "workers"}) {
    CAPTURE(table);
    const std::string sql = std::string("SELECT * FROM ") + table + " LIMIT 0";
    CHECK(sqlite.column_names(sql) == pg.column_names(sql));
  }
}
