// Which SQLite file the CLI and the daemon use, decided the same way by both:
// --db PATH, else `database:` from the config, else $NIGHTSHIFT_DB, else
// ./nightshift.db; and the connection settings from the config.
#pragma once

#include <string>

#include "daemon/lib/config.h"
#include "jobs/pg_queue.h"
#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::daemon {

inline constexpr const char* kDatabaseEnv = "NIGHTSHIFT_DB";
inline constexpr const char* kDefaultDatabase = "nightshift.db";

// `config` may be null (no --config given).
std::string resolve_database_path(const std::string& cli_db, const Config* config);

// How to open it: busy_timeout_ms, synchronous and integrity_check from the
// config (the defaults without one).
jobs::SqliteOptions sqlite_options_from(const Config* config);

// A PostgreSQL database's password_file from the config (none without one).
jobs::PgOptions pg_options_from(const Config* config);

}  // namespace ns::daemon
