// The queue backends the contract tests run against: every QUEUE_TEST runs
// once on a fresh SQLite file and once on a fresh database of a real
// PostgreSQL server.
//
// The PostgreSQL server is started once per test binary, on first use, by
// tests/support/pg_test_server.sh (initdb into a temp dir, a server on a unix
// socket there, as the `postgres` user when the tests run as root), and
// stopped when the binary exits (or, if it crashes, by the script's watcher).
// Each test gets a schema of its own (a fresh database would cost ~100 ms each).
// $NS_TEST_POSTGRES_URL points the tests at an existing server instead (the
// user must be allowed to create schemas there). Where the PostgreSQL server
// binaries are not installed, the PostgreSQL half of each test is skipped
// with a MESSAGE; any other failure to start the server fails the tests.
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "jobs/pg_conn.h"
#include "jobs/pg_migrations.h"
#include "jobs/pg_queue.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

namespace ns::test {

// One row of a query, as text (NULL = nullopt), for checking tables and views
// the same way on both backends.
struct Row {
  std::vector<std::optional<std::string>> cols;
  bool is_null(size_t i) const { return !cols.at(i).has_value(); }
  std::string text(size_t i) const { return cols.at(i).value_or(""); }
  int64_t int64(size_t i) const { return is_null(i) ? 0 : std::stoll(*cols.at(i)); }
  double real(size_t i) const { return is_null(i) ? 0 : std::stod(*cols.at(i)); }
};

class SqliteBackend {
 public:
  static constexpr const char* kName = "SQLite";
  static constexpr bool kPostgres = false;

  bool available() const { return true; }
  std::string skip_reason() const { return ""; }
  const std::string& location() const { return path_; }
  // A new connection to this test's database (migrated on open).
  std::unique_ptr<jobs::Queue> open() const { return jobs::open_sqlite_queue(path_, kFastCommits); }

  std::vector<Row> query(const std::string& sql) const {
    jobs::sqlite::Db db(path_, kFastCommits);
    sqlite3_stmt* st = nullptr;
    REQUIRE_MESSAGE(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) == SQLITE_OK,
                    sqlite3_errmsg(db.handle()));
    std::vector<Row> rows;
    while (sqlite3_step(st) == SQLITE_ROW) {
      Row r;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
        r.cols.push_back(text == nullptr ? std::nullopt : std::optional<std::string>(text));
      }
      rows.push_back(std::move(r));
    }
    sqlite3_finalize(st);
    return rows;
  }
  int64_t scalar(const std::string& sql) const {
    jobs::sqlite::Db db(path_, kFastCommits);
    return db.scalar_int(sql);
  }
  std::vector<std::string> column_names(const std::string& sql) const {
    jobs::sqlite::Db db(path_, kFastCommits);
    sqlite3_stmt* st = nullptr;
    REQUIRE_MESSAGE(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) == SQLITE_OK,
                    sqlite3_errmsg(db.handle()));
    std::vector<std::string> names;
    for (int i = 0; i < sqlite3_column_count(st); ++i) names.emplace_back(sqlite3_column_name(st, i));
    sqlite3_finalize(st);
    return names;
  }
  // Applies the migrations on a connection of its own; returns how many ran.
  int migrate() const {
    jobs::sqlite::Db db(path_, kFastCommits);
    return jobs::sqlite::migrate(db);
  }
  int schema_version() const { return static_cast<int>(scalar("PRAGMA user_version")); }
  static int latest_schema_version() { return jobs::sqlite::latest_schema_version(); }

 private:
  TempDir dir_;
  std::string path_ = dir_.file("q.db");
};

// The throwaway server shared by every PostgreSQL test of this binary.
class PgTestServer {
 public:
  static PgTestServer& instance() {
    static PgTestServer server;
    return server;
  }
  bool available() const { return !url_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& failure() const { return failure_; }
  // A URL for database `name` on this server.
  std::string url_for(const std::string& name) const {
    const size_t slash = url_.find('/', url_.find("://") + 3);
    const size_t query = url_.find('?', slash);
    return url_.substr(0, slash + 1) + name + (query == std::string::npos ? "" : url_.substr(query));
  }
  // A URL for a new, empty schema of its own in the server's database: the
  // queue's tables land there (first in its search_path). Much cheaper than
  // a database per test, and as isolated for what the tests do.
  std::string create_schema() {
    const std::string name = "nstest_" + std::to_string(getpid()) + "_" + std::to_string(counter_.fetch_add(1) + 1);
    jobs::pg::Conn admin(url_);
    admin.exec("CREATE SCHEMA " + name);
    return url_ + (url_.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + name;
  }

  ~PgTestServer() {
    if (dir_.empty()) return;
    const std::string cmd = "bash '" + script() + "' stop '" + dir_ + "' > /dev/null 2>&1";
    [[maybe_unused]] const int rc = std::system(cmd.c_str());
  }

 private:
  PgTestServer() {
    if (const char* url = std::getenv("NS_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') {
      url_ = url;
      return;
    }
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ns-pg-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      failure_ = "mkdtemp failed for " + tmpl;
      return;
    }
    const std::string log = tmpl + ".log";
    const std::string cmd =
        "bash '" + script() + "' start '" + tmpl + "' " + std::to_string(getpid()) + " 2> '" + log + "'";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r"); p != nullptr) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
      const int status = pclose(p);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      std::ifstream in(log);
      std::stringstream err;
      err << in.rdbuf();
      std::remove(log.c_str());
      while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
      if (code == 0 && !out.empty()) {
        url_ = out;
        dir_ = tmpl;
      } else if (code == 77) {
        skip_reason_ = err.str();
        rmdir(tmpl.c_str());
      } else {
        failure_ = "tests/support/pg_test_server.sh start failed (exit " + std::to_string(code) + "): " + err.str();
        const std::string cleanup = "bash '" + script() + "' stop '" + tmpl + "' > /dev/null 2>&1";
        [[maybe_unused]] const int rc = std::system(cleanup.c_str());
      }
    } else {
      failure_ = "cannot run " + cmd;
    }
  }
  static std::string script() { return std::string(NS_SOURCE_DIR) + "/tests/support/pg_test_server.sh"; }

  std::string url_, dir_, skip_reason_, failure_;
  std::atomic<int> counter_{0};
};

class PgBackend {
 public:
  static constexpr const char* kName = "PostgreSQL";
  static constexpr bool kPostgres = true;

  PgBackend() {
    PgTestServer& server = PgTestServer::instance();
    if (!server.failure().empty()) FAIL(server.failure());
    if (server.available()) url_ = server.create_schema();
  }

  bool available() const { return !url_.empty(); }
  std::string skip_reason() const { return PgTestServer::instance().skip_reason(); }
  const std::string& location() const { return url_; }
  std::unique_ptr<jobs::Queue> open() const { return jobs::open_pg_queue(url_); }

  std::vector<Row> query(const std::string& sql) const {
    jobs::pg::Conn conn(url_);
    jobs::pg::Result r = conn.exec(sql);
    std::vector<Row> rows;
    for (int i = 0; i < r.rows(); ++i) {
      Row row;
      for (int c = 0; c < r.columns(); ++c) {
        row.cols.push_back(r.is_null(i, c) ? std::nullopt : std::optional<std::string>(r.text(i, c)));
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }
  int64_t scalar(const std::string& sql) const {
    jobs::pg::Conn conn(url_);
    return conn.exec(sql).int64(0, 0);
  }
  std::vector<std::string> column_names(const std::string& sql) const {
    jobs::pg::Conn conn(url_);
    const jobs::pg::Result r = conn.exec(sql);
    std::vector<std::string> names;
    for (int c = 0; c < r.columns(); ++c) names.push_back(r.column_name(c));
    return names;
  }
  int migrate() const {
    jobs::pg::Conn conn(url_);
    return jobs::pg::migrate(conn);
  }
  int schema_version() const {
    return static_cast<int>(scalar("SELECT coalesce(max(version), 0) FROM nightshift_schema_version"));
  }
  static int latest_schema_version() { return jobs::pg::latest_schema_version(); }

 private:
  std::string url_;
};

// Claims the next job for `worker` and returns its lease (the test fails if
// nothing is claimable); the lease lasts `lease_ms`.
inline jobs::Lease claim_lease(jobs::Queue& q, const std::string& worker = "w", int64_t lease_ms = 60'000) {
  std::optional<jobs::Job> j = q.claim(worker, lease_ms);
  REQUIRE(j);
  return j->lease();
}

}  // namespace ns::test

// A test run once per backend; inside it, QUEUE_BACKEND(db) gives the fresh
// database (or skips the PostgreSQL run with a message where there is no server).
#define QUEUE_TEST(name) TEST_CASE_TEMPLATE(name, Backend, ns::test::SqliteBackend, ns::test::PgBackend)
#define QUEUE_BACKEND(db)                                                              \
  Backend db;                                                                          \
  if (!db.available()) {                                                               \
    MESSAGE("skipped on " << std::string(Backend::kName) << ": " << db.skip_reason()); \
    return;                                                                            \
  }
