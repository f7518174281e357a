#include "jobs/open_queue.h"

#include "jobs/sqlite_queue.h"

namespace ns::jobs {

bool is_postgres_url(const std::string& database) {
  return database.starts_with("postgresql://") || database.starts_with("postgres://");
}

std::unique_ptr<Queue> open_queue(const std::string& database, const SqliteOptions& sqlite) {
  if (is_postgres_url(database)) {
    throw DatabaseError(false, "database " + database +
                                   ": PostgreSQL queues are not built into this nightshift yet; use a SQLite file path");
  }
  return open_sqlite_queue(database, sqlite);
}

}  // namespace ns::jobs
