// Opening "the queue" by the `database:` setting, whatever backend it names:
// a SQLite file path (the embedded default) or a PostgreSQL connection URL
// (postgresql://user@host/db or postgres://...). The daemon and the CLI open
// queues only through this.
#pragma once

#include <memory>
#include <string>

#include "jobs/pg_queue.h"
#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::jobs {

// True for postgresql:// and postgres:// URLs (libpq's URI forms).
bool is_postgres_url(const std::string& database);

// `sqlite` applies to SQLite files; a server database has its own settings
// in the URL, and `pg` (the password file). Throws DatabaseError as the
// backend's open does.
std::unique_ptr<Queue> open_queue(const std::string& database, const SqliteOptions& sqlite = {},
                                  const PgOptions& pg = {});

}  // namespace ns::jobs
