#include "jobs/api_store.h"

#include "jobs/open_queue.h"

namespace ns::jobs {
namespace sqlite {
std::unique_ptr<ApiStore> open_sqlite_api_store(const std::string& path, const SqliteOptions& options);
}
namespace pg {
std::unique_ptr<ApiStore> open_pg_api_store(const std::string& url, const PgOptions& pg);
}

std::unique_ptr<ApiStore> open_api_store(const std::string& database, const SqliteOptions& sqlite,
                                         const PgOptions& pg) {
  if (is_postgres_url(database)) return pg::open_pg_api_store(database, pg);
  return sqlite::open_sqlite_api_store(database, sqlite);
}

}  // namespace ns::jobs
