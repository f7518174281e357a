#include <string>

#include "jobs/pg_conn.h"
#include "jobs/pg_migrations.h"
#include "jobs/queue.h"

namespace ns::jobs::pg {
namespace {

// The version recorded in the database; 0 when it has none yet.
int current_version(Conn& conn) {
  if (conn.exec("SELECT to_regclass('nightshift_schema_version')").is_null(0, 0)) return 0;
  return static_cast<int>(conn.exec("SELECT coalesce(max(version), 0) FROM nightshift_schema_version").int64(0, 0));
}

[[noreturn]] void refuse_newer(Conn& conn, int version, int latest) {
  throw DatabaseError(false, "database " + conn.name() + " has schema version " + std::to_string(version) +
                                 " but this nightshift knows versions up to " + std::to_string(latest) +
                                 "; upgrade nightshift (it never downgrades a database)");
}

}  // namespace

int latest_schema_version() { return migrations().back().version; }

int migrate(Conn& conn) {
  const int latest = latest_schema_version();
  int version = current_version(conn);  // cheap check without the lock first
  if (version > latest) refuse_newer(conn, version, latest);
  if (version == latest) return 0;

  Transaction tx(conn);
  conn.exec("SELECT pg_advisory_xact_lock($1)", Params().add(int64_t{kMigrationLockKey}));
  conn.exec(R"(
    CREATE TABLE IF NOT EXISTS nightshift_schema_version (
      version    integer PRIMARY KEY,
      file_name  text    NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    ))");
  version = current_version(conn);  // another process may have migrated meanwhile
  if (version > latest) refuse_newer(conn, version, latest);
  int applied = 0;
  for (const Migration& m : migrations()) {
    if (m.version <= version) continue;
    try {
      conn.exec_script(m.sql);
    } catch (const DatabaseError& e) {
      throw DatabaseError(e.transient(),
                          "migration " + std::string(m.file_name) + " failed (nothing was changed): " + e.what());
    }
    conn.exec("INSERT INTO nightshift_schema_version (version, file_name) VALUES ($1, $2)",
              Params().add(int64_t{m.version}).add(m.file_name));
    ++applied;
  }
  tx.commit();
  return applied;
}

}  // namespace ns::jobs::pg
