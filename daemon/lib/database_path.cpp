#include "daemon/lib/database_path.h"

#include <cstdlib>

namespace ns::daemon {

std::string resolve_database_path(const std::string& cli_db, const Config* config) {
  if (!cli_db.empty()) return cli_db;
  if (config != nullptr && !config->database.empty()) return config->database;
  if (const char* env = std::getenv(kDatabaseEnv); env != nullptr && *env != '\0') return env;
  return kDefaultDatabase;
}

}  // namespace ns::daemon
