#include <string>

#include "engine/util/error.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"

namespace ns::jobs::sqlite {

int latest_schema_version() { return migrations().back().version; }

int migrate(Db& db) {
  const int latest = latest_schema_version();
  int applied = 0;
  for (const Migration& m : migrations()) {
    // Cheap unlocked check first so an up-to-date database never takes the write lock.
    if (db.scalar_int("PRAGMA user_version") >= m.version) continue;
    WriteTransaction tx(db);
    const int64_t current = db.scalar_int("PRAGMA user_version");
    if (current > latest) break;  // reported below
    if (current >= m.version) continue;  // another process migrated meanwhile
    try {
      db.exec(m.sql);
    } catch (const Error& e) {
      throw Error(ErrorKind::database, "migration " + std::string(m.file_name) + " failed: " + e.what());
    }
    db.exec("PRAGMA user_version = " + std::to_string(m.version));
    tx.commit();
    ++applied;
  }
  const int64_t version = db.scalar_int("PRAGMA user_version");
  if (version > latest) {
    throw Error(ErrorKind::database, "database " + db.path() + " has schema version " + std::to_string(version) +
                                         " but this nightshift knows versions up to " + std::to_string(latest) +
                                         "; upgrade nightshift (it never downgrades a database)");
  }
  return applied;
}

}  // namespace ns::jobs::sqlite
