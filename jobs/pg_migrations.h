// The PostgreSQL schema as numbered migrations (schema/postgres/NNN_name.sql,
// embedded at build time by jobs/embed_sql.cmake) and the code that applies them.
//
// Contract: migrate() brings a database to the newest version this binary
// knows, in one transaction that first takes a transaction-scoped advisory
// lock (so daemons starting together on a new database migrate it once) and
// records each version in `nightshift_schema_version`. A database newer than
// this binary is refused rather than touched. An up-to-date database costs
// one query and no lock.
#pragma once

#include <span>

#include "jobs/migration.h"

namespace ns::jobs::pg {

class Conn;

// All migrations, in version order.
std::span<const Migration> migrations();

// The version migrate() brings a database to.
int latest_schema_version();

// The advisory lock key held while migrating (also by anything else that
// must not run during a migration).
inline constexpr long long kMigrationLockKey = 0x6e73717565756531;  // "nsqueue1"

// Applies the missing migrations; returns how many ran.
int migrate(Conn& conn);

}  // namespace ns::jobs::pg
