#include "daemon/lib/database_path.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace ns::daemon {

std::string resolve_database_path(const std::string& cli_db, const Config* config) {
  if (!cli_db.empty()) return cli_db;
  if (config != nullptr && !config->database.empty()) return config->database;
  if (const char* env = std::getenv(kDatabaseEnv); env != nullptr && *env != '\0') return env;
  return kDefaultDatabase;
}

jobs::SqliteOptions sqlite_options_from(const Config* config) {
  jobs::SqliteOptions o;
  if (config == nullptr) return o;
  o.busy_timeout_ms = config->busy_timeout_ms;
  o.synchronous = config->synchronous == "normal" ? jobs::Synchronous::normal : jobs::Synchronous::full;
  o.integrity_check = config->integrity_check == "full"    ? jobs::IntegrityCheck::full
                      : config->integrity_check == "quick" ? jobs::IntegrityCheck::quick
                                                           : jobs::IntegrityCheck::off;
  o.lease_watch_ms = config->lease_ms;
  o.max_backoff_ms = config->retry_backoff_max_ms;
  o.on_clock_disagreement = [](const std::string& what) { spdlog::warn("{}", what); };
  return o;
}

jobs::PgOptions pg_options_from(const Config* config) {
  jobs::PgOptions o;
  if (config != nullptr) o.password_file = config->password_file;
  return o;
}

}  // namespace ns::daemon
