// One numbered schema migration as embedded in the binary (schema/<backend>/
// NNN_name.sql, turned into a table by jobs/embed_sql.cmake). Each backend's
// *_migrations.h lists its own and applies them its own way.
#pragma once

#include <string_view>

namespace ns::jobs {

struct Migration {
  int version;            // NNN from the file name; 1, 2, 3, ... without gaps
  const char* file_name;  // e.g. "001_init.sql"
  std::string_view sql;
};

}  // namespace ns::jobs
