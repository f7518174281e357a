// The SQLite backend of the job queue (jobs/sqlite_queue.cpp): how to open
// it. Everything else about the queue is backend-neutral (jobs/queue.h).
#pragma once

#include <memory>
#include <string>

#include "jobs/queue.h"

namespace ns::jobs {

// PRAGMA synchronous in WAL mode. full: a commit is on disk when it returns
// (a power cut loses no submitted job, no result). normal: faster commits, a
// power cut (not a process crash) may roll back the last ones.
enum class Synchronous { normal, full };
// Checked when the queue is opened. quick: PRAGMA quick_check (every page
// and row, not index contents; linear in the file size); full: PRAGMA
// integrity_check (also indexes; slower); off: none.
enum class IntegrityCheck { off, quick, full };

struct SqliteOptions {
  int busy_timeout_ms = 5000;  // how long a write waits for another writer's lock
  Synchronous synchronous = Synchronous::full;
  IntegrityCheck integrity_check = IntegrityCheck::off;
  // For people reading a database they may not write (a read-only mount,
  // another user's file): opened read-only, nothing written (no WAL switch,
  // no migration: an older schema is refused with how to upgrade it). A WAL
  // database whose -shm file cannot be created is read as immutable, which
  // is consistent while no daemon writes it (one that does keeps -shm there).
  bool read_only = false;
};

// Opens (creating if needed) a SQLite queue, applying schema/sqlite
// migrations, then the integrity check (throws DatabaseError naming the
// problems and the way out when it fails).
std::unique_ptr<Queue> open_sqlite_queue(const std::string& path, const SqliteOptions& options = {});

}  // namespace ns::jobs
