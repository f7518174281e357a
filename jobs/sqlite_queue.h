// The SQLite backend of the job queue (jobs/sqlite_queue.cpp): how to open
// it. Everything else about the queue is backend-neutral (jobs/queue.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "jobs/backoff.h"
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
  // The processes sharing a file each stamp times with their own wall clock,
  // and those may disagree (docs/fleet.md, finding 2: a clock jumped a day
  // ahead took healthy leases over). With lease_watch_ms > 0, a lease this
  // clock distrusts (expired, or its worker's heartbeat far ahead: the
  // holder's clock runs ahead, or this one went back) is taken over only
  // once this process has watched it unrenewed for lease_watch_ms of its
  // steady clock (a live holder renews every lease_ms / 3): the daemon's
  // lease_ms. A stopped worker's lease is taken at once. 0: no watching.
  int64_t lease_watch_ms = 0;
  // A retry backoff that ends further ahead than this (plus kClockBackMs)
  // was stamped by a clock running ahead: the job is claimable at once. The
  // daemon's retry_backoff_max_ms.
  int64_t max_backoff_ms = Backoff{}.max_ms;
  // Told once per attempt of a lease that looked expired but was renewed
  // while watched (the clocks disagree); may be empty.
  std::function<void(const std::string&)> on_clock_disagreement;
};

// Opens (creating if needed) a SQLite queue, applying schema/sqlite
// migrations, then the integrity check (throws DatabaseError naming the
// problems and the way out when it fails).
std::unique_ptr<Queue> open_sqlite_queue(const std::string& path, const SqliteOptions& options = {});

}  // namespace ns::jobs
