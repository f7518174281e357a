#include <string>

#include "common/error.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"

namespace ns::jobs::sqlite {
namespace {

// Foreign keys off for the duration of the migrations and back on after,
// whatever happens: a migration that rebuilds a table drops the old one, and
// with foreign keys on that drop would cascade into the rows referring to it.
// (The pragma is a no-op inside a transaction, so this wraps them.)
class ForeignKeysOff {
 public:
  explicit ForeignKeysOff(Db& db) : db_(db) { db_.exec("PRAGMA foreign_keys = OFF"); }
  ~ForeignKeysOff() {
    try {
      db_.exec("PRAGMA foreign_keys = ON");
    } catch (...) {  // never throw from a destructor; the next statement reports a broken connection
    }
  }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;

 private:
  Db& db_;
};

// Inside the migration's transaction: the rebuilt tables must still satisfy
// every foreign key, or the migration is rolled back.
void check_foreign_keys(Db& db, const Migration& m) {
  Stmt st(db, "PRAGMA foreign_key_check");
  if (st.step()) {
    throw DatabaseError(false, "migration " + std::string(m.file_name) + " left a row in table " + st.text(0) +
                                   " (rowid " + std::to_string(st.int64(1)) + ") whose reference to " + st.text(2) +
                                   " is broken; nothing was changed");
  }
}

}  // namespace

int latest_schema_version() { return migrations().back().version; }

int migrate(Db& db) {
  const int latest = latest_schema_version();
  int applied = 0;
  for (const Migration& m : migrations()) {
    // Cheap unlocked check first so an up-to-date database never takes the write lock.
    if (db.scalar_int("PRAGMA user_version") >= m.version) continue;
    ForeignKeysOff fk_off(db);
    WriteTransaction tx(db);
    const int64_t current = db.scalar_int("PRAGMA user_version");
    if (current > latest) break;         // reported below
    if (current >= m.version) continue;  // another process migrated meanwhile
    try {
      db.exec(m.sql);
    } catch (const DatabaseError& e) {
      throw DatabaseError(e.transient(), "migration " + std::string(m.file_name) + " failed: " + e.what());
    }
    check_foreign_keys(db, m);
    db.exec("PRAGMA user_version = " + std::to_string(m.version));
    tx.commit();
    ++applied;
  }
  const int64_t version = db.scalar_int("PRAGMA user_version");
  if (version > latest) {
    throw DatabaseError(false, "database " + db.path() + " has schema version " + std::to_string(version) +
                                   " but this nightshift knows versions up to " + std::to_string(latest) +
                                   "; upgrade nightshift (it never downgrades a database)");
  }
  return applied;
}

}  // namespace ns::jobs::sqlite
