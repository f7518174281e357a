// Which SQLite file the CLI and the daemon use, decided the same way by both:
// --db PATH, else `database:` from the config, else $NIGHTSHIFT_DB, else
// ./nightshift.db.
#pragma once

#include <string>

#include "daemon/lib/config.h"

namespace ns::daemon {

inline constexpr const char* kDatabaseEnv = "NIGHTSHIFT_DB";
inline constexpr const char* kDefaultDatabase = "nightshift.db";

// `config` may be null (no --config given).
std::string resolve_database_path(const std::string& cli_db, const Config* config);

}  // namespace ns::daemon
