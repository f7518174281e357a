// The SQLite schema as numbered migrations (schema/sqlite/NNN_name.sql,
// embedded at build time by jobs/embed_sql.cmake) and the code that applies them.
//
// Contract: migrate() brings a database to the newest version this binary
// knows, one migration per BEGIN IMMEDIATE transaction that also sets
// PRAGMA user_version; safe when several processes open the same file at once
// (each re-reads the version under the write lock). A database newer than
// this binary is refused rather than touched.
#pragma once

#include <span>

#include "jobs/migration.h"

namespace ns::jobs::sqlite {

class Db;

// All migrations, in version order.
std::span<const Migration> migrations();

// The version migrate() brings a database to.
int latest_schema_version();

// Applies the missing migrations; returns how many ran.
int migrate(Db& db);

}  // namespace ns::jobs::sqlite
