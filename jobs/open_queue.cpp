#include "jobs/open_queue.h"

#include "jobs/pg_queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::jobs {

bool is_postgres_url(const std::string& database) {
  return database.starts_with("postgresql://") || database.starts_with("postgres://");
}

std::unique_ptr<Queue> open_queue(const std::string& database, const SqliteOptions& sqlite, const PgOptions& pg) {
  if (is_postgres_url(database)) return open_pg_queue(database, pg);
  return open_sqlite_queue(database, sqlite);
}

}  // namespace ns::jobs
