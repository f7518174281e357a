// The PostgreSQL backend of the job queue (jobs/pg_queue.cpp): how to open
// it. Everything else about the queue is backend-neutral (jobs/queue.h).
#pragma once

#include <memory>
#include <string>

#include "jobs/queue.h"

namespace ns::jobs {

// Connection settings kept out of the URL (#30 C: a URL shows in `ps`, logs and shell history).
struct PgOptions {
  // A file holding the password alone (its first line; `database:`'s URL names no password). Read at
  // each connection (a rotated password is picked up at the next reconnect) and refused, with a
  // non-transient DatabaseError naming the file and the fix, when its group or others may read it or it
  // is not a regular file. Empty: libpq's own ways (PGPASSFILE, ~/.pgpass, the URL).
  std::string password_file;
};

// Connects to the database named by a libpq URL (postgresql://user@host/db,
// postgres://..., with ?host=/socket/dir for a unix socket), applying
// schema/postgres migrations. Throws DatabaseError (transient when the server
// cannot be reached yet). The queue reconnects by itself after a lost
// connection; times come from the database server's clock.
std::unique_ptr<Queue> open_pg_queue(const std::string& url, const PgOptions& options = {});

}  // namespace ns::jobs
